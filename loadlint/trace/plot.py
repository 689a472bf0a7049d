"""``--plot``: per rank, over the run's time, the share of each step the GPU
was busy and the share spent waiting for data, as step lines: a loader
bottleneck shows as a sawtooth (needs matplotlib, the ``plot`` extra).

Only loadlint's settings apply: matplotlib is imported away from the
current folder (whose ``matplotlibrc`` it would read, or block on if it is a
FIFO) and draws with its built-in defaults, without TeX; the trace's strings
are drawn as plain text, never as mathtext.  A long run is drawn in at most
``MAX_BARS`` groups of consecutive steps, so drawing costs the same at 50k
steps as at 2k.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

from loadlint.sources.source import visible
from loadlint.trace.analyse import Diagnosis
from loadlint.trace.metrics import Step

#: The most bars drawn per rank; step starts are drawn up to ``MAX_LINES``.
MAX_BARS = 2000
MAX_LINES = 200


def _pyplot() -> Any:
    with tempfile.TemporaryDirectory() as empty, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        here = os.getcwd()
        os.chdir(empty)
        try:
            import matplotlib

            matplotlib.use("Agg")  # files only, never a window
            import matplotlib.pyplot as plt
        finally:
            os.chdir(here)
    return plt


def groups(steps: list[Step], most: int = MAX_BARS) -> tuple[list[float], list[float], list[float] | None]:
    """(edges in ms since the first step, data wait %, GPU busy % or None):
    one bar per step, or per group of consecutive steps (its shares over
    the group's time) when there are more than ``most``."""
    size = max(1, math.ceil(len(steps) / most))
    origin = steps[0].start
    edges: list[float] = []
    wait: list[float] = []
    busy: list[float] | None = [] if any(s.gpu_busy_ms is not None for s in steps) else None
    for first in range(0, len(steps), size):
        group = steps[first:first + size]
        total = sum(s.dur_ms for s in group)
        edges.append((group[0].start - origin) / 1e3)
        wait.append(100 * sum(s.data_wait_ms for s in group) / total if total else 0.0)
        if busy is not None:
            busy.append(100 * sum(s.gpu_busy_ms or 0.0 for s in group) / total if total else 0.0)
    edges.append((steps[-1].start - origin) / 1e3 + steps[-1].dur_ms)
    return edges, wait, busy


def draw(diagnoses: list[Diagnosis], path: Path) -> str | None:
    """Draw the plot; what matplotlib warned of meanwhile (a glyph missing
    from its font...) as one escaped line, None when nothing."""
    plt = _pyplot()
    import matplotlib

    notes: list[str] = []
    # Its warnings would print matplotlib's paths and the trace's raw text.
    with matplotlib.rc_context(), warnings.catch_warnings(record=True) as caught, _logged(notes):
        warnings.simplefilter("always")
        matplotlib.rcdefaults()
        matplotlib.rcParams["text.usetex"] = False
        _draw(plt, diagnoses, path)
    for message in [str(w.message) for w in caught] + notes:
        if message not in notes:
            notes.append(message)
    if not notes:
        return None
    more = f" (and {len(notes) - 1} more)" if len(notes) > 1 else ""
    return visible(" ".join(notes[0].split())) + more


class _Collect(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())


class _logged:
    """matplotlib's log records of warning level and above go to ``into``, not stderr."""

    def __init__(self, into: list[str]) -> None:
        self.handler = _Collect(into)
        self.logger = logging.getLogger("matplotlib")

    def __enter__(self) -> None:
        self.propagate = self.logger.propagate
        self.logger.propagate = False
        self.logger.addHandler(self.handler)

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self.handler)
        self.logger.propagate = self.propagate


def _draw(plt: Any, diagnoses: list[Diagnosis], path: Path) -> None:
    fig, axes = plt.subplots(len(diagnoses), 1, figsize=(11, 2.6 * len(diagnoses) + 0.6), squeeze=False)
    for ax, d in zip(axes[:, 0], diagnoses):
        rank = d.rank
        if not rank.steps:
            continue
        # Each bar spans its steps' time: their shares hold over that span.
        edges, wait, busy = groups(rank.steps)
        ax.stairs(wait, edges, fill=True, color="#dd8452", alpha=0.6, label="data wait % of step")
        if busy is not None:
            ax.stairs(busy, edges, color="#4c72b0", linewidth=1.8, label="GPU busy % of step")
        lines = len(rank.steps) <= MAX_LINES
        if lines:
            origin = rank.steps[0].start
            ax.vlines([(s.start - origin) / 1e3 for s in rank.steps], 0, 105, color="#cccccc", linewidth=0.5, zorder=0)
        title = f"rank {rank.rank}: " if rank.rank is not None else ""
        codes = ", ".join(f.code for f in d.findings) or "no findings"
        grouped = f", {len(edges) - 1} bars" if len(edges) - 1 < len(rank.steps) else ""
        # Hidden characters shown escaped, as in every line printed (no font has a glyph for them).
        ax.set_title(f"{title}{visible(Path(rank.path).name)} ({visible(rank.device)}, {len(rank.steps)} steps{grouped}) - {codes}",
                     fontsize=9, usetex=False, parse_math=False)
        ax.set_ylim(0, 105)
        ax.set_ylabel("% of step")
        ax.set_xlabel("ms since the first step" + (" (grey lines: step starts)" if lines else ""))
        ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
