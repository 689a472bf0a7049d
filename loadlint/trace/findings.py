"""From measurements to findings: the static codes where the trace shows
what a static rule describes, and the run-time codes (LL3xx) for what only
a run shows.  Each finding carries its evidence and the most it could gain.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from loadlint.rules import CODES, name_of
from loadlint.rules.runtime import (
    DATA_WAIT_SHARE, IDLE_SHARE, RANK_WAIT_MS, RANK_WAIT_RATIO, RUNTIME_CODES, SAWTOOTH_STEPS,
)
from loadlint.trace.metrics import Rank, Step

SINGLE, MULTI = "_SingleProcessDataLoaderIter", "_MultiProcessingDataLoaderIter"
#: Pageable copies below this many bytes in the whole trace, or taking less
#: than this share of the step time, are noise.
PAGEABLE_MIN_BYTES = 1 << 20
PAGEABLE_SHARE = 0.01
#: Blocking copies that hold the loop for this share of the step time.
BLOCKING_SHARE = 0.02
#: A pass's first wait this many times the median wait (and at least a
#: quarter of the median step) is workers starting again.
RESTART_RATIO = 4.0



@dataclass
class TraceFinding:
    code: str
    message: str
    evidence: dict[str, Any]
    #: path, row, column of the DataLoader call, when mapped
    location: dict[str, Any] | None = None
    #: how the call was found and how sure that is
    mapping: str | None = None
    #: static findings of that call: "path:row:col: CODE message"
    static: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return name_of(self.code) if self.code in CODES else RUNTIME_CODES[self.code].name

    def as_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "evidence": self.evidence, "location": self.location}


def _ms(value: float) -> float:
    return round(value, 3)


def _without_wait(steps: list[Step]) -> float:
    return statistics.median(s.dur_ms - s.data_wait_ms for s in steps)


def _gain(steps: list[Step]) -> dict[str, Any]:
    before, after = statistics.median(s.dur_ms for s in steps), _without_wait(steps)
    return {"median_step_ms": _ms(before), "median_step_without_wait_ms": _ms(after),
            "speedup": round(before / after, 2) if after > 0 else None}


def _wait_text(evidence: dict[str, Any]) -> str:
    return (f"the typical step waits for data: median step {evidence['median_step_ms']:.1f} ms, "
            f"{evidence['median_step_without_wait_ms']:.1f} ms without the wait "
            f"({evidence['typical_wait_share']:.0%} of it); over the trace data wait is {evidence['data_wait_share']:.0%} of the step time")


def diagnose(rank: Rank) -> list[TraceFinding]:
    """The findings of one rank, in code order."""
    found: list[TraceFinding] = []
    starts = set(rank.epoch_starts)
    steady = [s for s in rank.steps if s.index not in starts] or rank.steps
    total = sum(s.dur_ms for s in steady)
    gain = _gain(steady)
    # The typical step decides, not the total: a few long waits (a pass
    # starting, a hiccup) would otherwise dominate a short trace.
    typical = 1 - gain["median_step_without_wait_ms"] / gain["median_step_ms"] if gain["median_step_ms"] else 0.0
    evidence = {"data_wait_share": round(sum(s.data_wait_ms for s in steady) / total if total else 0.0, 3),
                "typical_wait_share": round(typical, 3), **gain}
    if typical >= DATA_WAIT_SHARE and SINGLE in rank.iterators:
        found.append(TraceFinding("LL201", "DataLoader loads in the training process (num_workers=0): " + _wait_text(evidence),
                                  {"iterator": SINGLE, **evidence}))
    elif typical >= DATA_WAIT_SHARE and MULTI in rank.iterators:
        found.append(TraceFinding("LL301", "Loading still dominates with workers on: " + _wait_text(evidence),
                                  {"iterator": MULTI, **evidence}))
    found += _pageable(rank) + _blocking(rank) + _restarts(rank, steady) + _sawtooth(rank, steady)
    return sorted(found, key=lambda f: f.code)


def _pageable(rank: Rank) -> list[TraceFinding]:
    per_step = rank.pageable_us / 1e3 / max(1, len(rank.steps))
    if rank.pageable_bytes < PAGEABLE_MIN_BYTES or per_step < PAGEABLE_SHARE * rank.median_step_ms:
        return []
    evidence = {"pageable_bytes": rank.pageable_bytes, "pageable_gbps": _round(rank.pageable_gbps),
                "pinned_bytes": rank.pinned_bytes, "pinned_gbps": _round(rank.pinned_gbps),
                "pageable_copy_ms_per_step": _ms(per_step)}
    speed = f" at {rank.pageable_gbps:.1f} GB/s" if rank.pageable_gbps else ""
    pinned = f" (pinned copies here ran at {rank.pinned_gbps:.1f} GB/s)" if rank.pinned_gbps else ""
    return [TraceFinding("LL202", f"Host-to-device copies from pageable memory: {_size(rank.pageable_bytes)}{speed}{pinned}, "
                         f"{per_step:.2f} ms per step that pin_memory=True with non_blocking copies can overlap", evidence)]


def _blocking(rank: Rank) -> list[TraceFinding]:
    blocked = sum(us for _, us in rank.blocking) / 1e3
    total = sum(s.dur_ms for s in rank.steps)
    if not rank.blocking or not total or blocked / total < BLOCKING_SHARE:
        return []
    calls = sorted({name for name, _ in rank.blocking})
    per_step = blocked / max(1, len(rank.steps))
    evidence = {"blocking_copies": len(rank.blocking), "calls": calls, "blocked_ms": _ms(blocked),
                "blocked_share": round(blocked / total, 3), "blocked_ms_per_step": _ms(per_step)}
    return [TraceFinding("LL205", f"{len(rank.blocking)} blocking host-to-device copies ({', '.join(calls)}) hold the loop "
                         f"{per_step:.2f} ms per step ({blocked / total:.0%} of the step time); "
                         "copy with non_blocking=True from pinned memory", evidence)]


def _restarts(rank: Rank, steady: list[Step]) -> list[TraceFinding]:
    if MULTI not in rank.iterators or not rank.epoch_starts or len(steady) < 2:
        return []
    wait = statistics.median(s.data_wait_ms for s in steady)
    step = statistics.median(s.dur_ms for s in steady)
    starts = [rank.steps[i] for i in rank.epoch_starts
              if rank.steps[i].data_wait_ms >= max(RESTART_RATIO * wait, 0.25 * step)]
    # The trace's first step may be the profiler's, not a pass's, start:
    # restarts count only when a later pass shows one too.
    if not any(s.index > 0 for s in starts):
        return []
    lost = sum(s.data_wait_ms - wait for s in starts)
    first_waits = [_ms(s.data_wait_ms) for s in starts]
    evidence = {"epoch_start_steps": [s.index for s in starts], "epoch_start_wait_ms": first_waits,
                "median_wait_ms": _ms(wait), "lost_ms": _ms(lost)}
    return [TraceFinding("LL204", f"Workers start again at each pass over the loader: {len(starts)} pass starts wait "
                         f"{statistics.median(first_waits):.1f} ms for the first batch "
                         f"(median wait {wait:.1f} ms); persistent_workers=True saves up to {lost:.1f} ms here", evidence)]


def _sawtooth(rank: Rank, steady: list[Step]) -> list[TraceFinding]:
    if not rank.has_gpu or len(rank.steps) < 3:
        return []
    teeth = [s for s in steady
             if s.dur_ms > 0 and (idle := s.dur_ms - (s.gpu_busy_ms or 0.0)) >= IDLE_SHARE * s.dur_ms
             and s.data_wait_ms >= 0.5 * idle]
    if len(teeth) < max(3, SAWTOOTH_STEPS * len(rank.steps)):
        return []
    busy = rank.gpu_busy_share or 0.0
    mean = sum(s.dur_ms for s in rank.steps) / len(rank.steps)
    saved = sum(s.data_wait_ms for s in teeth) / len(rank.steps)
    evidence = {"idle_steps": len(teeth), "steps": len(rank.steps), "gpu_busy_share": round(busy, 3),
                "mean_step_ms": _ms(mean), "mean_step_without_wait_ms": _ms(mean - saved)}
    return [TraceFinding("LL302", f"GPU idle sawtooth: in {len(teeth)} of {len(rank.steps)} steps the GPU idles while the loop "
                         f"waits for data (GPU busy {busy:.0%} of the step time); without those waits the mean step would drop "
                         f"from {mean:.1f} ms to {mean - saved:.1f} ms", evidence)]


def across_ranks(ranks: list[Rank]) -> dict[int, TraceFinding]:
    """LL303 findings, keyed by the position of the rank that lags.  Only
    traces that name distinct ranks (``distributedInfo``) are compared: the
    files of one process (the cycles of a schedule) are not ranks."""
    numbers = [r.rank for r in ranks]
    if len(ranks) < 2 or None in numbers or len(set(numbers)) != len(numbers):
        return {}
    medians = [statistics.median(s.data_wait_ms for s in r.steps) if r.steps else 0.0 for r in ranks]
    found = {}
    for i, (rank, wait) in enumerate(zip(ranks, medians)):
        # Against the others: with two ranks, a median over all would be
        # the lagging rank's own half.
        typical = statistics.median(medians[:i] + medians[i + 1:])
        if wait >= RANK_WAIT_RATIO * typical and wait - typical >= RANK_WAIT_MS:
            label = f"rank {rank.rank}"
            evidence = {"median_wait_ms": _ms(wait), "median_wait_other_ranks_ms": _ms(typical), "lost_ms_per_step": _ms(wait - typical)}
            found[i] = TraceFinding("LL303", f"{label} waits {wait:.1f} ms per step for data, the other ranks' median is {typical:.1f} ms: "
                                    f"every rank loses up to {wait - typical:.1f} ms per step at the next collective", evidence)
    return found


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _size(nbytes: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"
