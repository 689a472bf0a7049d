"""A declared training machine on its own: ``hardware --target`` shows it
with nothing of this machine, ``init`` writes it to ``pyproject.toml``.

Fixes without a declared CPU count write nothing that depends on the machine
they run on (see ``rules.shared.workers_code``); declaring the target is how
a project gets the target's numbers instead.
"""

from __future__ import annotations

import errno
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from loadlint.hardware.detect import GIB, detected_target, ranks_per_node, resolve_profile, suggest_num_workers
from loadlint.sources.boundary import is_inside, repository_root
from loadlint.sources.files import create_new, read_source, write_atomic
from loadlint.types import HardwareProfile, Target

__all__ = ["TargetExists", "detected_target", "format_target", "target_profile", "target_to_dict", "write_target"]


class TargetExists(Exception):
    """The configuration file declares a target already."""


def target_profile(target: Target) -> HardwareProfile:
    """A declared target alone, nothing of this machine in it."""
    return resolve_profile(target, detector=lambda **_: HardwareProfile(usable_cpus=1, gpu_count=None))


def _toml_value(key: str, value: Any) -> str:
    if key in ("memory", "shm"):
        # Whole GiB, rounded down: a target is an estimate, and a bare number reads as GiB.
        return str(value // GIB) if value >= GIB else json.dumps(f"{max(1, value // 2**20)}MiB")
    return str(value) if isinstance(value, int) else json.dumps(str(value))


def target_table(target: Target) -> str:
    """``[tool.loadlint.target]`` with ``target``'s keys, in the documented order."""
    lines = ["[tool.loadlint.target]"]
    lines += [f"{key} = {_toml_value(key, value)}" for key, value in target.items()]
    return "\n".join(lines) + "\n"


#: The most bytes of ``pyproject.toml`` read (a configuration's bound).
MAX_PYPROJECT_BYTES = 4 * 1024 * 1024
_HEADER = re.compile(r"[ \t]*\[[ \t]*tool[ \t]*\.[ \t]*loadlint[ \t]*\.[ \t]*target[ \t]*\][ \t]*(#.*)?")
#: Any table header: where the target table ends.
_ANY_HEADER = re.compile(r"[ \t]*\[")


def write_target(pyproject: Path, target: Target, *, force: bool = False) -> str:
    """Write the target table to ``pyproject`` (created when missing): appended,
    or with ``force`` in place of the one there, every other byte kept; the
    table written.

    Read and written as ``check`` reads and ``fix`` writes: a FIFO, device or
    link out of the project is refused, the file is replaced atomically, and
    a missing file is created without following a link planted in its place.
    """
    within = str(repository_root(Path(os.path.abspath(pyproject)).parent))
    # Refused alike whether the link's target exists: the answer reveals nothing outside.
    if not is_inside(os.path.realpath(pyproject), within, resolved=True):
        raise OSError(errno.EACCES, "link leads outside the project")
    if os.path.islink(pyproject) and not os.path.exists(pyproject):
        raise OSError(errno.EACCES, "a link to a missing file; not written")
    try:
        original: bytes | None = read_source(pyproject, within=within, limit=MAX_PYPROJECT_BYTES)
    except FileNotFoundError:
        original = None
    text = "" if original is None else original.decode("utf-8")
    newline = "\r\n" if "\r\n" in text else "\n"
    table = target_table(target)
    lines = text.splitlines(keepends=True)
    header = next((i for i, line in enumerate(lines) if _HEADER.fullmatch(line.rstrip("\r\n"))), None)
    if header is None and _declares_target(text):
        raise TargetExists(f"{pyproject.name} declares the target outside a [tool.loadlint.target] header; edit it there")
    if header is not None and not force:
        raise TargetExists(f"{pyproject.name} declares [tool.loadlint.target] already; edit it there or pass --force to replace it")
    written = table.replace("\n", newline)
    if header is None:
        separator = "" if not text else (newline if text.endswith("\n") else newline * 2)
        new = text + separator + written
        if text and _parsed(new) is None and _parsed(text) is not None:
            raise TargetExists(f"{pyproject.name}: cannot add [tool.loadlint.target] to what it declares; edit it there")
    else:
        new = "".join(lines[:header]) + written + "".join(lines[_table_end(lines, header):])
        if not _same_besides_target(text, new, target):
            raise TargetExists(f"{pyproject.name}: cannot replace [tool.loadlint.target] safely; edit it there")
    if original is None:
        create_new(pyproject, new.encode("utf-8"))
    else:
        write_atomic(pyproject, original, new.encode("utf-8"))
    return table


def _table_end(lines: list[str], header: int) -> int:
    """The line after the table's last key: comments and blank lines before
    the next header stay, as they belong to what follows."""
    end = header + 1
    for i in range(header + 1, len(lines)):
        stripped = lines[i].strip()
        if _ANY_HEADER.match(lines[i]):
            break
        if stripped and not stripped.startswith("#"):
            end = i + 1
    return end


def _parsed(text: str) -> dict[str, Any] | None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        parsed: dict[str, Any] = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        return None
    return parsed


def _loadlint_table(data: dict[str, Any] | None) -> dict[str, Any]:
    tool = (data or {}).get("tool")
    table = tool.get("loadlint") if isinstance(tool, dict) else None
    return table if isinstance(table, dict) else {}


def _declares_target(text: str) -> bool:
    return "target" in text and "target" in _loadlint_table(_parsed(text))


def _same_besides_target(before: str, after: str, target: Target) -> bool:
    """Whether ``after`` parses to ``before`` with only the target replaced
    (a value spanning lines that looks like a header would break that)."""
    old, new = _parsed(before), _parsed(after)
    if old is None or new is None:
        return False
    new_target = _loadlint_table(new).pop("target", None)
    _loadlint_table(old).pop("target", None)
    return old == new and new_target == _loadlint_table(_parsed(target_table(target))).get("target")


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
    # Declared keys only: `detect` declares this machine's, nothing fills the rest.
    title = "target (the declared keys only)"
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
