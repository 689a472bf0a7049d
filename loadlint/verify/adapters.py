"""The seams between verify and the rest of loadlint.

verify leans on three things other layers provide: the machine profile
(:mod:`loadlint.hardware`), the static findings (``loadlint.api``) and the
configuration ``loadlint fix`` would write. Each is reached through one
function here that degrades to a local rule of thumb when the provider is
missing, so verify keeps working while those layers change.
"""

from __future__ import annotations

import os
from typing import Any

from loadlint.signature import TUNABLE_DEFAULTS


def detect_profile() -> Any:
    """The machine's :class:`~loadlint.types.HardwareProfile`."""
    try:
        from loadlint.hardware import detect
    except ImportError:
        return _fallback_profile()
    return detect()


def _fallback_profile() -> Any:
    from loadlint.types import HardwareProfile

    logical = os.cpu_count() or 1
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = logical
    quota = None
    try:
        with open("/sys/fs/cgroup/cpu.max") as fh:
            q, period = fh.read().split()[:2]
            if q != "max":
                quota = int(q) / int(period)
    except (OSError, ValueError):
        pass
    usable = affinity if quota is None else max(1, min(affinity, int(quota)))
    return HardwareProfile(usable_cpus=usable, logical_cpus=logical,
                           affinity_cpus=affinity, cgroup_cpus=quota)


def suggest_num_workers(profile: Any, ranks_per_node: int = 1,
                        batch_size: int | None = None) -> int:
    try:
        from loadlint.hardware import suggest_num_workers as suggest
    except ImportError:
        return max(1, profile.usable_cpus // max(1, ranks_per_node) - 1)
    return int(suggest(profile, ranks_per_node=ranks_per_node, batch_size=batch_size))


def finding_rows(path: str) -> list[int] | None:
    """Rows of the static findings in ``path``; ``None`` when the static
    side is unavailable (the caller then takes the first loader built)."""
    try:
        from loadlint.api import check_paths  # type: ignore[attr-defined]
    except (ImportError, AttributeError):
        return None
    from pathlib import Path

    try:
        found = check_paths([Path(path)])
    except Exception:  # the linter failing must not stop a measurement
        return None
    # A list of findings, or a run whose results each carry findings.
    findings = found if isinstance(found, list) else [
        f for result in getattr(found, "results", []) for f in getattr(result, "findings", [])]
    rows = []
    for f in findings:
        if os.path.abspath(getattr(f, "path", path)) == os.path.abspath(path):
            rows.append(int(f.location.row))
    return sorted(set(rows))


def suggested_config(path: str, line: int, profile: Any, current: dict[str, Any],
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
        from loadlint.api import suggest_for_call  # type: ignore[attr-defined]

        proposed = suggest_for_call(path, line, profile)
    except (ImportError, AttributeError):
        proposed = None
    except Exception:
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
