"""The seams between verify and the static side of loadlint: which calls
have findings (``loadlint.api.project_findings``) and the configuration
``loadlint fix`` would write (``loadlint.api.suggest_for_call``), with the
machine's worker suggestion (:func:`loadlint.hardware.detect.suggest_num_workers`)
where no fix applies.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from loadlint.api import project_findings, suggest_for_call
from loadlint.hardware.detect import suggest_num_workers
from loadlint.facts.signature import TUNABLE_DEFAULTS
from loadlint.types import HardwareProfile


def finding_sites(path: str) -> dict[str, list[int]] | None:
    """Rows of the static findings of the script's folder, by absolute file
    path, those the project analysis joins across files included (a loader
    built in a module the script imports: ``examples/modular``); ``None``
    when the linter fails (the caller then takes the first loader built)."""
    try:
        return project_findings(Path(os.path.abspath(path)).parent)
    except Exception:  # the linter failing must not stop a measurement
        return None


def suggested_config(path: str, line: int, profile: HardwareProfile, current: dict[str, Any],
                     *, cuda: bool, ranks_per_node: int = 1,
                     batch_size: int | None = None, project: str | None = None) -> tuple[dict[str, Any], str]:
    """The tunable keywords of the call ``loadlint fix`` would write.

    ``current`` maps every tunable keyword to its present value. The static
    side's ``suggest_for_call`` returns the keywords of the fixed call
    (keyword -> value, removed keywords absent); a tunable keyword it omits
    is therefore reset to DataLoader's default. Returns the new mapping and
    where it came from.
    """
    try:
        proposed = suggest_for_call(path, line, profile, Path(project) if project else None)
    except Exception:  # an unreadable or unparsable script: fall back below
        proposed = None
    if proposed is not None:
        config = {}
        for key, default in TUNABLE_DEFAULTS.items():
            value = proposed.get(key, default)
            config[key] = value if _plain(value) else current.get(key, default)
        if not _plain(proposed.get("persistent_workers")) and not current.get("persistent_workers"):
            # The fix's ``persistent_workers=<count> > 0`` for a count known at run time.
            config["persistent_workers"] = bool(config.get("num_workers"))
        return config, "loadlint fix"
    nw = suggest_num_workers(profile, ranks_per_node=ranks_per_node, batch_size=batch_size)
    config = dict(current)
    config["num_workers"] = nw
    config["persistent_workers"] = nw > 0
    config["pin_memory"] = bool(cuda)
    return config, "rule of thumb (loadlint fix unavailable)"


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))
