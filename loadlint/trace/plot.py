"""``--plot``: per rank, over the run's time, the share of each step the GPU
was busy and the share spent waiting for data, as step lines: a loader
bottleneck shows as a sawtooth (needs matplotlib, the ``plot`` extra)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a window

import matplotlib.pyplot as plt  # noqa: E402

from loadlint.trace.analyse import Diagnosis  # noqa: E402


def draw(diagnoses: list[Diagnosis], path: Path) -> None:
    fig, axes = plt.subplots(len(diagnoses), 1, figsize=(11, 2.6 * len(diagnoses) + 0.6), squeeze=False)
    for ax, d in zip(axes[:, 0], diagnoses):
        rank = d.rank
        if not rank.steps:
            continue
        origin = rank.steps[0].start
        # Each step spans [start, start + dur): its shares hold over that span.
        x = [(s.start - origin) / 1e3 for s in rank.steps] + [(rank.steps[-1].start - origin) / 1e3 + rank.steps[-1].dur_ms]
        wait = [100 * s.data_wait_ms / s.dur_ms if s.dur_ms else 0.0 for s in rank.steps]
        ax.stairs(wait, x, fill=True, color="#dd8452", alpha=0.6, label="data wait % of step")
        if rank.has_gpu:
            busy = [100 * (s.gpu_busy_ms or 0.0) / s.dur_ms if s.dur_ms else 0.0 for s in rank.steps]
            ax.stairs(busy, x, color="#4c72b0", linewidth=1.8, label="GPU busy % of step")
        for s in rank.steps:
            ax.axvline((s.start - origin) / 1e3, color="#cccccc", linewidth=0.5, zorder=0)
        title = f"rank {rank.rank}: " if rank.rank is not None else ""
        codes = ", ".join(f.code for f in d.findings) or "no findings"
        ax.set_title(f"{title}{Path(rank.path).name} ({rank.device}, {len(rank.steps)} steps) - {codes}", fontsize=9)
        ax.set_ylim(0, 105)
        ax.set_ylabel("% of step")
        ax.set_xlabel("ms since the first step (grey lines: step starts)")
        ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
