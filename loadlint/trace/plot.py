"""``--plot``: GPU busy and data wait per step, one panel per rank, so a
sawtooth is visible at a glance (needs matplotlib, the ``plot`` extra)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a window

import matplotlib.pyplot as plt  # noqa: E402

from loadlint.trace.analyse import Diagnosis  # noqa: E402


def draw(diagnoses: list[Diagnosis], path: Path) -> None:
    fig, axes = plt.subplots(len(diagnoses), 1, figsize=(10, 2.6 * len(diagnoses) + 0.6), squeeze=False, sharex=True)
    for ax, d in zip(axes[:, 0], diagnoses):
        rank = d.rank
        x = [s.index for s in rank.steps]
        ax.bar(x, [s.dur_ms for s in rank.steps], color="#dddddd", label="step time")
        if rank.has_gpu:
            ax.bar(x, [s.gpu_busy_ms or 0.0 for s in rank.steps], color="#4c72b0", width=0.6, label="GPU busy")
        ax.bar(x, [s.data_wait_ms for s in rank.steps], color="#dd8452", width=0.3, label="data wait")
        title = f"rank {rank.rank}: " if rank.rank is not None else ""
        codes = ", ".join(f.code for f in d.findings) or "no findings"
        ax.set_title(f"{title}{Path(rank.path).name} ({rank.device}) - {codes}", fontsize=9)
        ax.set_ylabel("ms")
        ax.legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("step")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
