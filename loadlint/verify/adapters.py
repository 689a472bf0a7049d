"""The seams between verify and the static side of loadlint: which calls
have findings (``loadlint.api.check_paths``) and the configuration
``loadlint fix`` would write (``loadlint.api.suggest_for_call``), with the
machine's worker suggestion (:func:`loadlint.hardware.detect.suggest_num_workers`)
where no fix applies.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from loadlint.api import Overrides, check_paths, suggest_for_call
from loadlint.hardware.detect import suggest_num_workers
from loadlint.facts.signature import TUNABLE_DEFAULTS
from loadlint.types import HardwareProfile


def finding_rows(path: str) -> list[int] | None:
    """Rows of the static findings in ``path``; ``None`` when the linter
    fails on it (the caller then takes the first loader built)."""
    try:
        run = check_paths([Path(path)], Overrides(performance_in_tests=True))
    except Exception:  # the linter failing must not stop a measurement
        return None
    here = os.path.abspath(path)
    return sorted({f.location.row for result in run.results for f in result.findings
                   if os.path.abspath(f.path) == here})


def suggested_config(path: str, line: int, profile: HardwareProfile, current: dict[str, Any],
                     *, cuda: bool, ranks_per_node: int = 1,
                     batch_size: int | None = None) -> tuple[dict[str, Any], str]:
    """The tunable keywords of the call ``loadlint fix`` would write.

    ``current`` maps every tunable keyword to its present value. The static
    side's ``suggest_for_call`` returns the keywords of the fixed call
    (keyword -> value, removed keywords absent); a tunable keyword it omits
    is therefore reset to DataLoader's default. Returns the new mapping and
    where it came from.
    """
    try:
        proposed = suggest_for_call(path, line, profile)
    except Exception:  # an unreadable or unparsable script: fall back below
        proposed = None
    if proposed is not None:
        config = {}
        for key, default in TUNABLE_DEFAULTS.items():
            value = proposed.get(key, default)
            config[key] = value if _plain(value) else current.get(key, default)
        return config, "loadlint fix"
    nw = suggest_num_workers(profile, ranks_per_node=ranks_per_node, batch_size=batch_size)
    config = dict(current)
    config["num_workers"] = nw
    config["persistent_workers"] = nw > 0
    config["pin_memory"] = bool(cuda)
    return config, "rule of thumb (loadlint fix unavailable)"


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))
