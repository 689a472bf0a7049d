"""The measurement protocol's arithmetic: statistics, the decision rule,
the contention gate, projections and tuning policy.

Pure Python on plain numbers: the shim (inside the user's process) and the
parent both import it, and the unit tests feed it synthetic timings. Every
value a verdict rests on is a *rate* where higher is better (epochs per
second, steps per second), so one rule serves every mode.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field
from typing import Any, Sequence

#: A candidate must beat the current configuration by at least this much,
#: or by the current configuration's own spread when that is larger.
MIN_GAIN = 0.05

#: CPU time not ours on our CPUs, as a share of their capacity, above which
#: a window is contended. Idle machines measure well under 3 %.
FOREIGN_SHARE_LIMIT = 0.10
#: Run-queue wait per second of our own CPU time above which a window is
#: contended, used only when our processes alone fit on the usable CPUs
#: (otherwise they queue behind each other and the wait says nothing).
WAIT_SHARE_LIMIT = 0.25
#: A branch whose rate is below this fraction of the best is clearly slower.
CLEARLY_SLOWER = 0.85

VERDICTS = ("confirmed", "refuted", "inconclusive", "contended")


@dataclass(frozen=True)
class Protocol:
    """Minimums of one measured run; tests shrink them through the
    environment so that a whole suite stays fast."""

    warmup_min: int = 5
    batches_min: int = 30
    seconds_min: float = 2.0
    repeats: int = 5
    max_retries: int = 2
    #: Extra rounds allowed while a comparison stays inconclusive (the
    #: issue's "more repeats within a time budget"); ``None``: ``repeats``.
    extra_rounds: int | None = None
    #: Batches per worker in the measured window and, times the prefetch
    #: factor, in the warm-up (every worker fills its queue first).
    per_worker: int = 10
    warmup_per_worker: int = 2

    def warmup(self, num_workers: int, prefetch_factor: int | None) -> int:
        pf = prefetch_factor or (2 if num_workers else 0)
        return max(self.warmup_min, self.warmup_per_worker * num_workers * pf)

    def measured(self, num_workers: int) -> int:
        return max(self.batches_min, self.per_worker * num_workers)

    @property
    def max_rounds(self) -> int:
        extra = self.repeats if self.extra_rounds is None else self.extra_rounds
        return self.repeats + max(0, extra)

    @classmethod
    def from_env(cls, **overrides: object) -> "Protocol":
        env = os.environ
        values: dict[str, object] = {}
        for name, key, kind in (
            ("warmup_min", "LOADLINT_VERIFY_WARMUP", int),
            ("batches_min", "LOADLINT_VERIFY_MIN_BATCHES", int),
            ("seconds_min", "LOADLINT_VERIFY_MIN_SECONDS", float),
            ("per_worker", "LOADLINT_VERIFY_PER_WORKER", int),
            ("warmup_per_worker", "LOADLINT_VERIFY_WARMUP_PER_WORKER", int),
            ("max_retries", "LOADLINT_VERIFY_RETRIES", int),
            ("extra_rounds", "LOADLINT_VERIFY_EXTRA_ROUNDS", int),
        ):
            if env.get(key):
                values[name] = kind(env[key])
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def spread(values: Sequence[float]) -> float:
    """Relative range ``(max - min) / median``: with five runs it is the
    honest width of what one more run could show."""
    if len(values) < 2:
        return 0.0
    mid = median(values)
    return (max(values) - min(values)) / mid if mid else math.inf


@dataclass(frozen=True)
class Decision:
    verdict: str
    speedup: float
    threshold: float
    spread: float
    n_current: int
    n_candidate: int
    reason: str


def decide(
    current: Sequence[float],
    candidate: Sequence[float],
    *,
    min_gain: float = MIN_GAIN,
    min_runs: int = 3,
) -> Decision:
    """The issue's rule on rates (higher is better).

    Confirmed: every candidate run beats every current run and the speedup
    of the medians reaches ``1 + max(min_gain, spread(current))``. Refuted:
    the mirror image. Inconclusive otherwise, including too few runs.
    """
    cur_spread = spread(current)
    threshold = 1.0 + max(min_gain, cur_spread)
    if not current or not candidate:
        return Decision("inconclusive", math.nan, threshold, cur_spread,
                        len(current), len(candidate), "no completed runs")
    speedup = median(candidate) / median(current) if median(current) else math.inf
    n = (len(current), len(candidate))
    if min(n) < min_runs:
        return Decision("inconclusive", speedup, threshold, cur_spread, *n,
                        f"fewer than {min_runs} runs on one side")
    if min(candidate) > max(current) and speedup >= threshold:
        return Decision("confirmed", speedup, threshold, cur_spread, *n,
                        "every candidate run beat every current run")
    if max(candidate) < min(current) and speedup > 0 and 1.0 / speedup >= threshold:
        return Decision("refuted", speedup, threshold, cur_spread, *n,
                        "every candidate run was slower than every current run")
    if min(candidate) <= max(current) and max(candidate) >= min(current):
        why = "the runs overlap"
    else:
        why = f"the difference is below the {threshold:.2f}x threshold"
    return Decision("inconclusive", speedup, threshold, cur_spread, *n, why)


# --------------------------------------------------------------------------
# Contention gate
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """What one measured run saw of the machine.

    ``foreign_busy_s`` is CPU time spent on our CPUs by anything that is
    not us (steal included), ``None`` when it cannot be attributed (a CPU
    quota on a larger host: the other tenants' CPUs are not ours to count).
    """

    wall_s: float
    usable_cpus: float
    foreign_busy_s: float | None
    our_cpu_s: float
    runq_wait_s: float
    demand: int  # processes we keep runnable: workers + the main process

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Window":
        return cls(
            wall_s=float(d["wall_s"]),
            usable_cpus=float(d["usable_cpus"]),
            foreign_busy_s=None if d.get("foreign_busy_s") is None else float(d["foreign_busy_s"]),
            our_cpu_s=float(d.get("our_cpu_s", 0.0)),
            runq_wait_s=float(d.get("runq_wait_s", 0.0)),
            demand=int(d.get("demand", 1)),
        )


@dataclass(frozen=True)
class Gate:
    contended: bool
    foreign_share: float | None
    wait_share: float
    reason: str


def gate_limits() -> tuple[float, float, bool]:
    """The gate's limits; ``LOADLINT_VERIFY_GATE_SCALE`` multiplies them
    (a plumbing test on a shared CI machine sets it high; every report
    then says the gate was relaxed)."""
    scale = float(os.environ.get("LOADLINT_VERIFY_GATE_SCALE") or 1.0)
    return FOREIGN_SHARE_LIMIT * scale, WAIT_SHARE_LIMIT * scale, scale != 1.0


def gate(w: Window) -> Gate:
    foreign_limit, wait_limit, _ = gate_limits()
    capacity = max(w.wall_s * w.usable_cpus, 1e-9)
    foreign = None if w.foreign_busy_s is None else max(0.0, w.foreign_busy_s) / capacity
    wait = w.runq_wait_s / max(w.our_cpu_s, 1e-3)
    if foreign is not None and foreign > foreign_limit:
        return Gate(True, foreign, wait,
                    f"{foreign:.0%} of the usable CPUs were busy with other work")
    if w.demand <= w.usable_cpus and wait > wait_limit:
        return Gate(True, foreign, wait,
                    f"our processes waited {wait:.2f} s for a CPU per CPU-second "
                    "although they fit on the usable CPUs")
    return Gate(False, foreign, wait, "quiet")


# --------------------------------------------------------------------------
# Projection, ceiling, tuning
# --------------------------------------------------------------------------


def project_epoch(startup_s: float, steady_batches_per_s: float, n_batches: int) -> float:
    """Seconds for one of the user's real epochs: start-up + len / rate."""
    if steady_batches_per_s <= 0:
        return math.inf
    return startup_s + n_batches / steady_batches_per_s


def ceiling(usable_cpus: float, num_workers: int) -> float:
    """The most parallel loading can give CPU-bound work: the main process
    plus workers share ``usable_cpus``, so no more than that many times
    single-process speed (and no more than the workers that exist)."""
    return float(max(1.0, min(usable_cpus, max(1, num_workers))))


def clearly_slower(rates: Sequence[float], best: Sequence[float],
                   margin: float = CLEARLY_SLOWER) -> bool:
    """Early stop for a tuning branch: its best run is below ``margin`` of
    the leader's median, so more repeats cannot rescue it."""
    if not rates or not best:
        return False
    return max(rates) < margin * median(best)


def num_workers_sweep(usable_cpus: int) -> list[int]:
    """0, 1, 2, 4, ... up to the usable CPUs (which is included)."""
    values = [0, 1]
    n = 2
    while n <= usable_cpus:
        values.append(n)
        n *= 2
    if usable_cpus > 1 and usable_cpus not in values:
        values.append(usable_cpus)
    return values


@dataclass
class Series:
    """Every run of one candidate: the rate the verdict uses, per run."""

    name: str
    rates: list[float] = field(default_factory=list)
    contended: int = 0
