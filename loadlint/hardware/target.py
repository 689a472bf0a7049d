"""A declared training machine on its own: ``hardware --target`` shows it
with nothing of this machine, ``init`` writes it to ``pyproject.toml``.

Fixes without a declared CPU count write nothing that depends on the machine
they run on (see ``rules.shared.workers_code``); declaring the target is how
a project gets the target's numbers instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from loadlint.hardware.detect import GIB, detect, ranks_per_node, resolve_profile, suggest_num_workers
from loadlint.types import HardwareProfile

__all__ = ["TargetExists", "detected_target", "format_target", "target_profile", "target_to_dict", "write_target"]


class TargetExists(Exception):
    """The configuration file declares a target already."""


def target_profile(target: Mapping[str, Any]) -> HardwareProfile:
    """A declared target alone, nothing of this machine in it."""
    return resolve_profile(target, detector=lambda **_: HardwareProfile(usable_cpus=1, gpu_count=None))


def detected_target() -> dict[str, Any]:
    """This machine as a target: what ``init`` writes without ``--target``."""
    profile = detect()
    target: dict[str, Any] = {"cpus": profile.usable_cpus, "gpus": profile.gpu_count or 0}
    if profile.memory_total:
        target["memory"] = profile.memory_total
    if profile.shm_bytes:
        target["shm"] = profile.shm_bytes
    target["platform"] = profile.platform
    target["python"] = profile.python
    return target


def _toml_value(key: str, value: Any) -> str:
    if key in ("memory", "shm"):
        # Whole GiB, rounded down: a target is an estimate, and a bare number reads as GiB.
        return str(value // GIB) if value >= GIB else json.dumps(f"{max(1, value // 2**20)}MiB")
    return str(value) if isinstance(value, int) else json.dumps(str(value))


def target_table(target: Mapping[str, Any]) -> str:
    """``[tool.loadlint.target]`` with ``target``'s keys, in the documented order."""
    order = ("cpus", "gpus", "memory", "shm", "platform", "python", "torch")
    lines = ["[tool.loadlint.target]"]
    lines += [f"{key} = {_toml_value(key, target[key])}" for key in order if key in target]
    return "\n".join(lines) + "\n"


def write_target(pyproject: Path, target: Mapping[str, Any]) -> str:
    """Append the target table to ``pyproject`` (created when missing); the table written."""
    text = pyproject.read_text(encoding="utf-8") if pyproject.exists() else ""
    if any(line.strip().replace(" ", "") == "[tool.loadlint.target]" for line in text.splitlines()):
        raise TargetExists(f"{pyproject.name} declares [tool.loadlint.target] already; edit it there")
    table = target_table(target)
    separator = "" if not text else ("\n" if text.endswith("\n") else "\n\n")
    pyproject.write_text(text + separator + table, encoding="utf-8")
    return table


def format_target(profile: HardwareProfile) -> str:
    declared = profile.declared

    def row(key: str, text: str) -> str:
        return text if key in declared else "not declared"

    gpus = str(profile.gpu_count)
    rows: list[tuple[str, str]] = [
        ("usable CPUs", row("cpus", str(profile.usable_cpus))),
        ("memory total", row("memory", f"{(profile.memory_total or 0) / GIB:.1f} GiB")),
        ("/dev/shm", row("shm", f"{(profile.shm_bytes or 0) / GIB:.1f} GiB")),
        ("GPUs", row("gpus", gpus)),
        ("platform", row("platform", profile.platform)),
        ("Python", row("python", profile.python)),
        ("torch", row("torch", profile.torch)),
    ]
    if "cpus" in declared:
        rows.append(("num_workers", f"{suggest_num_workers(profile)} (one process)"))
        ranks = ranks_per_node(profile, distributed=True)
        if ranks > 1:
            rows.append(("num_workers/rank", f"{suggest_num_workers(profile, ranks)} (DDP, {ranks} ranks)"))
    else:
        rows.append(("num_workers", "declare cpus to get a number"))
    width = max(len(key) for key, _ in rows) + 2
    title = "target (nothing of this machine is shown)"
    return title + "\n" + "\n".join(f"{key + ':':<{width}}{value}" for key, value in rows)


def target_to_dict(profile: HardwareProfile) -> dict[str, Any]:
    """``hardware --target --json``: the declared keys only, the suggestion when ``cpus`` is declared."""
    values: dict[str, Any] = {
        "cpus": profile.usable_cpus, "gpus": profile.gpu_count, "memory": profile.memory_total,
        "shm": profile.shm_bytes, "platform": profile.platform, "python": profile.python, "torch": profile.torch,
    }
    out: dict[str, Any] = {"declared": sorted(profile.declared)}
    out.update({key: value for key, value in values.items() if key in profile.declared})
    if "cpus" in profile.declared:
        ranks = ranks_per_node(profile, distributed=True)
        out["suggested_num_workers"] = {
            "single_process": suggest_num_workers(profile),
            "per_rank_ddp": suggest_num_workers(profile, ranks) if ranks > 1 else None,
            "ddp_ranks": ranks if ranks > 1 else None,
        }
    return out
