"""Per-step figures of one rank: step time, data wait, GPU busy, copies.

All times in the trace are microseconds; the results are milliseconds.
"""

from __future__ import annotations

import statistics
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from loadlint.trace.events import Events, device_name, rank_of

_SYNC_CALLS = frozenset({"cudaStreamSynchronize", "cudaDeviceSynchronize"})


@dataclass
class Step:
    index: int
    start: float  # microseconds, trace clock
    dur_ms: float
    data_wait_ms: float
    gpu_busy_ms: float | None


@dataclass
class Rank:
    """One trace's measurements."""

    path: str
    rank: int | None
    device: str
    steps: list[Step]
    #: "ProfilerStep" or "DataLoader __next__ (inferred)"
    step_source: str
    iterators: list[str]
    pageable_bytes: int = 0
    pinned_bytes: int = 0
    pageable_us: float = 0.0
    pinned_us: float = 0.0
    #: (runtime call, microseconds blocked) of blocking host-to-device copies
    blocking: list[tuple[str, float]] = field(default_factory=list)
    #: steps that start a pass over the loader with a long wait (workers starting)
    epoch_starts: list[int] = field(default_factory=list)
    #: "file(line): function" frames that iterate the loader (with_stack)
    callers: list[str] = field(default_factory=list)

    @property
    def has_gpu(self) -> bool:
        return any(s.gpu_busy_ms is not None for s in self.steps)

    @property
    def median_step_ms(self) -> float:
        return statistics.median(s.dur_ms for s in self.steps) if self.steps else 0.0

    @property
    def data_wait_share(self) -> float:
        total = sum(s.dur_ms for s in self.steps)
        return sum(s.data_wait_ms for s in self.steps) / total if total else 0.0

    @property
    def gpu_busy_share(self) -> float | None:
        if not self.has_gpu:
            return None
        total = sum(s.dur_ms for s in self.steps)
        return sum(s.gpu_busy_ms or 0.0 for s in self.steps) / total if total else 0.0

    @property
    def pageable_gbps(self) -> float | None:
        return _gbps(self.pageable_bytes, self.pageable_us)

    @property
    def pinned_gbps(self) -> float | None:
        return _gbps(self.pinned_bytes, self.pinned_us)

    @property
    def iterator(self) -> str:
        return self.iterators[0] if len(self.iterators) == 1 else ", ".join(self.iterators)


def _gbps(nbytes: int, micros: float) -> float | None:
    return nbytes / micros / 1e3 if micros > 0 and nbytes else None


def _union(intervals: list[tuple[float, float]]) -> tuple[list[float], list[float], list[float]]:
    """Merged intervals as (starts, ends, cumulative length before each)."""
    starts: list[float] = []
    ends: list[float] = []
    for start, end in sorted(intervals):
        if ends and start <= ends[-1]:
            ends[-1] = max(ends[-1], end)
        else:
            starts.append(start)
            ends.append(end)
    before, total = [], 0.0
    for start, end in zip(starts, ends):
        before.append(total)
        total += end - start
    return starts, ends, before


def _covered(merged: tuple[list[float], list[float], list[float]], lo: float, hi: float) -> float:
    """How much of [lo, hi) the merged intervals cover."""
    starts, ends, before = merged
    first = bisect_right(ends, lo)
    last = bisect_left(starts, hi)
    if first >= last:
        return 0.0
    inside = (before[last - 1] + ends[last - 1] - starts[last - 1]) - before[first]
    inside -= max(0.0, lo - starts[first])
    inside -= max(0.0, ends[last - 1] - hi)
    return max(0.0, inside)


def _windows(events: Events) -> tuple[list[tuple[float, float, float]], str]:
    """(start, end, duration) of each step: the duration as recorded, since
    end - start loses nanoseconds at the magnitude of trace timestamps."""
    if events.steps:
        steps = sorted({(ts, dur) for ts, dur, _ in events.steps})
        return [(ts, ts + dur, dur) for ts, dur in steps], "ProfilerStep"
    starts = sorted(ts for ts, _, _ in events.loader)
    return [(a, b, b - a) for a, b in zip(starts, starts[1:])], "DataLoader __next__ (inferred)"


def measure(events: Events) -> Rank:
    """The per-step figures of one reduced trace."""
    windows, source = _windows(events)
    waits = _union([(ts, ts + dur) for ts, dur, _ in events.loader])
    device = _union(events.device) if events.device else None
    steps = [
        Step(i, lo, dur / 1e3, _covered(waits, lo, hi) / 1e3,
             _covered(device, lo, hi) / 1e3 if device is not None else None)
        for i, (lo, hi, dur) in enumerate(windows)
    ]
    rank = Rank(str(events.path), rank_of(events), device_name(events), steps, source,
                sorted({cls for _, _, cls in events.loader}))
    for copy in events.copies:
        if copy.pinned:
            rank.pinned_bytes += copy.nbytes
            rank.pinned_us += copy.dur
        else:
            rank.pageable_bytes += copy.nbytes
            rank.pageable_us += copy.dur
    rank.blocking = _blocking(events)
    rank.epoch_starts = _epoch_starts(events, steps)
    rank.callers = _callers(events)
    return rank


def _blocking(events: Events) -> list[tuple[str, float]]:
    """Synchronous ``cudaMemcpy`` calls of a host-to-device copy, and stream
    or device synchronisations that directly follow an asynchronous one on
    the same thread."""
    h2d = {c.correlation for c in events.copies if c.correlation is not None}
    found: list[tuple[str, float]] = []
    previous: dict[int, tuple[str, int | None, float]] = {}
    for ts, dur, name, corr, tid in sorted(events.runtime):
        if name == "cudaMemcpy" and corr in h2d:
            found.append((name, dur))
        elif name in _SYNC_CALLS:
            before = previous.get(tid)
            if before and before[0] == "cudaMemcpyAsync" and before[1] in h2d:
                # The host waits through both calls: a copy from pageable
                # memory returns only once it is staged.
                found.append((f"cudaMemcpyAsync + {name}", before[2] + dur))
        previous[tid] = (name, corr, dur)
    return found


def _epoch_starts(events: Events, steps: list[Step]) -> list[int]:
    """Steps that start a pass over the loader with a long wait.

    With Python frames (``with_stack=True``), a pass starts where
    ``DataLoader.__iter__`` runs.  Without them, only a pattern that cannot
    be a hiccup counts: at least three long waits (half the longest, four
    times the median wait, a quarter of the median step) at a constant
    period of steps, give or take one (``drop_last``).  Otherwise none."""
    if len(steps) < 3:
        return []
    median_wait = statistics.median(s.data_wait_ms for s in steps)
    median_step = statistics.median(s.dur_ms for s in steps)
    long_wait = max(4 * median_wait, 0.25 * median_step, 1.0)
    iters = sorted(ts for ts, _, _, name in events.frames if name.startswith("torch/utils/data/dataloader.py") and name.endswith(": __iter__"))
    if iters:
        starts = [s.start for s in steps]
        # A ProfilerStep holds its pass's __iter__; an inferred step starts
        # at the first __next__, after it.
        shift = 1 if events.steps else 0
        marked = {min(len(steps) - 1, max(0, bisect_right(starts, ts) - shift)) for ts in iters}
        return sorted(i for i in marked if steps[i].data_wait_ms >= long_wait)
    longest = max(s.data_wait_ms for s in steps)
    found = [s.index for s in steps if s.data_wait_ms >= max(long_wait, 0.5 * longest)]
    gaps = [b - a for a, b in zip(found, found[1:])]
    if len(found) >= 3 and min(gaps) >= 2 and max(gaps) - min(gaps) <= 1:
        return found
    return []


def _callers(events: Events) -> list[str]:
    """The innermost non-torch frames that enclose ``DataLoader.__next__``."""
    nexts = [(ts, end, tid) for ts, end, tid, name in events.frames
             if name.startswith("torch/utils/data/dataloader.py") and name.endswith(": __next__")]
    if not nexts:
        return []
    asked: dict[int, list[tuple[float, float, int]]] = {}
    for index, (ts, end, tid) in enumerate(nexts[:64]):
        asked.setdefault(tid, []).append((ts, end, index))
    threads: dict[int, list[tuple[float, float, str]]] = {}
    for ts, end, tid, name in events.frames:
        if tid in asked and not name.startswith(("torch/", "<built-in")):
            threads.setdefault(tid, []).append((ts, end, name))
    callers: dict[int, str] = {}
    for tid, spans in asked.items():
        frames = sorted(threads.get(tid, []))
        stack: list[tuple[float, float, str]] = []
        taken = 0
        # Frames nest: sweeping the thread's frames by start, the stack
        # holds those still open; the innermost one open past __next__'s
        # end is its caller.  One pass per thread, not one per __next__.
        for ts, end, index in sorted(spans):
            while taken < len(frames) and frames[taken][0] <= ts:
                while stack and stack[-1][1] < frames[taken][0]:
                    stack.pop()
                stack.append(frames[taken])
                taken += 1
            while stack and stack[-1][1] < ts:
                stack.pop()
            # No Python stack is deeper than this (the recursion limit is far below).
            for _, f_end, name in reversed(stack[-_CALLER_DEPTH:]):
                if f_end >= end:
                    callers[index] = name
                    break
    found: dict[str, int] = {}
    for index in sorted(callers):  # ties keep the order of the trace
        found[callers[index]] = found.get(callers[index], 0) + 1
    return sorted(found, key=lambda n: -found[n])


#: Open frames looked through for a ``__next__``'s caller.
_CALLER_DEPTH = 4096
