"""``--plot``: the run's steps drawn as ``loadlint trace --plot`` draws a
trace's (data wait and, when sampled, GPU busy per step)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadlint.monitor.report import as_json
from loadlint.trace.analyse import Diagnosis
from loadlint.trace.plot import draw as draw_ranks
from loadlint.trace.saved import from_report


def draw(report: dict[str, Any], path: Path) -> None:
    rank, findings = from_report("loadlint monitor", as_json(report))
    draw_ranks([Diagnosis(rank, findings)], path)
