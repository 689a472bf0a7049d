"""Reports that ``loadlint monitor`` wrote (``-o FILE``), read as a trace:
they follow the trace's JSON contract, so ``--compare`` and ``--plot``
take them beside profiler traces.  Recognised by their first bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loadlint.sources.files import read_source
from loadlint.trace.findings import TraceFinding
from loadlint.trace.metrics import Rank, Step
from loadlint.trace.stream import TraceError

MARKER = b'"schema": "loadlint.monitor/'


def is_monitor_report(path: Path) -> bool:
    if not path.name.endswith(".json"):
        return False
    try:
        with open(path, "rb") as handle:
            return MARKER in handle.read(64)
    except OSError:
        return False


def from_report(name: str, data: dict[str, Any]) -> tuple[Rank, list[TraceFinding]]:
    """The report's top level (its busiest loader) as a rank, with its findings."""
    try:
        steps = [Step(int(s["index"]), float(s["start_ms"]) * 1e3, float(s["dur_ms"]), float(s["data_wait_ms"]),
                      None if s.get("gpu_busy_ms") is None else float(s["gpu_busy_ms"]))
                 for s in data["steps"]]
        summary = data["summary"]
        rank = Rank(name, None, str(summary.get("device") or "cpu"), steps, "loadlint monitor", list(data.get("iterators") or []))
        h2d = summary.get("h2d") or {}
        rank.pageable_bytes = int(h2d.get("pageable_bytes") or 0)
        rank.pinned_bytes = int(h2d.get("pinned_bytes") or 0)
        findings = [TraceFinding(str(f["code"]), str(f["message"]), dict(f.get("evidence") or {}), f.get("location"))
                    for f in data.get("findings") or []]
    except (KeyError, TypeError, ValueError) as exc:
        raise TraceError(f"{name}: a loadlint monitor report without the trace contract's fields ({type(exc).__name__}: {exc})") from None
    if not steps:
        raise TraceError(f"{name}: the monitor report has no steps (no DataLoader was iterated)")
    return rank, findings


def read(path: Path) -> tuple[Rank, list[TraceFinding]]:
    # As a trace is read: the guarded read (a regular file, 64 MiB at most)
    # and a nesting the decoder can follow, else one line.
    try:
        data = json.loads(read_source(path))
    except OSError as exc:
        raise TraceError(f"{path}: unreadable monitor report ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise TraceError(f"{path}: unreadable monitor report ({exc})") from None
    except RecursionError:
        raise TraceError(f"{path}: unreadable monitor report (nested too deeply)") from None
    if not isinstance(data, dict):
        raise TraceError(f"{path}: not a monitor report")
    return from_report(str(path), data)
