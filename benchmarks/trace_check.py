"""An independent check of ``loadlint trace``'s figures on real traces.

    python benchmarks/trace_check.py TRACE.json[.gz] ...

For each trace it computes, with plain ``json.load`` and none of
loadlint's code, the step count, median step time, data wait share, GPU
busy share (the union of kernel, memcpy and memset intervals inside each
``ProfilerStep#N``, or between consecutive DataLoader ``__next__`` spans
when there is none) and the host-to-device bytes, then the same figures
through ``loadlint.trace`` (streamed), and prints both side by side with
the largest relative difference.  Traces without DataLoader spans are
measured too (their data wait is 0): loadlint's command refuses them, its
reader is called here with ``require_loader=False``.
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from pathlib import Path


def independent(path: Path) -> dict[str, float]:
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    complete = [e for e in events if e.get("ph") == "X"]
    # Recent PyTorch also writes each ProfilerStep on the GPU's timeline
    # (cat gpu_user_annotation): the CPU's are the steps.
    steps = sorted({(float(e["ts"]), float(e["dur"])) for e in complete
                    if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation"})
    waits = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in complete
             if str(e.get("name", "")).startswith("enumerate(DataLoader)#") and str(e["name"]).endswith("__next__")]
    if not steps:  # no ProfilerStep: from one __next__ to the next
        starts = sorted(a for a, _ in waits)
        steps = [(a, b - a) for a, b in zip(starts, starts[1:])]
    gpu = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in complete
           if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    h2d = sum(int((e.get("args") or {}).get("bytes", 0)) for e in complete
              if e.get("cat") == "gpu_memcpy" and "HtoD" in str(e.get("name")))

    def covered(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
        # Clip, sort, sweep: the length of the union inside [lo, hi).
        clipped = sorted((max(a, lo), min(b, hi)) for a, b in intervals if b > lo and a < hi)
        total, end = 0.0, lo
        for a, b in clipped:
            if b > end:
                total += b - max(a, end)
                end = b
        return total

    durs = [dur for _, dur in steps]
    total = sum(durs)
    return {
        "steps": len(steps),
        "median_step_ms": statistics.median(durs) / 1e3 if durs else 0.0,
        "data_wait_share": sum(covered(waits, ts, ts + dur) for ts, dur in steps) / total if total else 0.0,
        "gpu_busy_share": sum(covered(gpu, ts, ts + dur) for ts, dur in steps) / total if total and gpu else 0.0,
        "h2d_bytes": h2d,
    }


def loadlint_figures(path: Path) -> dict[str, float]:
    from loadlint.trace.events import load
    from loadlint.trace.metrics import measure

    rank = measure(load(path, require_loader=False))
    return {
        "steps": len(rank.steps),
        "median_step_ms": rank.median_step_ms,
        "data_wait_share": rank.data_wait_share,
        "gpu_busy_share": rank.gpu_busy_share or 0.0,
        "h2d_bytes": rank.pageable_bytes + rank.pinned_bytes,
    }


def main(paths: list[str]) -> int:
    worst = 0.0
    for name in paths:
        path = Path(name)
        mine, theirs = loadlint_figures(path), independent(path)
        print(path.name)
        for key in mine:
            a, b = float(mine[key]), float(theirs[key])
            diff = abs(a - b) / max(abs(b), 1e-12) if (a or b) else 0.0
            worst = max(worst, diff)
            print(f"  {key:<16} loadlint {a:>14.4f}   independent {b:>14.4f}   rel. diff {diff:.2e}")
    print(f"largest relative difference: {worst:.2e}")
    return 0 if worst < 1e-6 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
