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
from dataclasses import dataclass
from typing import Any, Sequence

#: A candidate must beat the current configuration by at least this much,
#: or by the current configuration's own round-to-round noise when larger.
MIN_GAIN = 0.05
#: The most that noise raises the threshold: the pairs already cancel the
#: drift from round to round (on a machine shared with bursty work it
#: reaches 40 %, which would hide a 2x gain the interval proves).
MAX_NOISE_GAIN = 0.2

#: CPU time not ours on our CPUs, as a share of their capacity, above which
#: a run is reported as taken under load (it is kept: the paired decision
#: copes with load). Idle machines measure well under 3 %.
FOREIGN_SHARE_LIMIT = 0.10
#: Run-queue wait per second of our own CPU time above which a run is
#: reported as taken under load, used only when our processes alone fit on the usable CPUs
#: (otherwise they queue behind each other and the wait says nothing).
WAIT_SHARE_LIMIT = 0.25
#: A branch whose rate is below this fraction of the best is clearly slower.
CLEARLY_SLOWER = 0.85

#: Confidence level of the paired interval.
LEVEL = 0.95
#: Fewest pairs for an interval: the t-interval on the log ratios needs two
#: degrees of freedom (with one, a 95 % interval is 12.7 standard errors wide).
MIN_PAIRS = 3
#: Fewest pairs for which the exact sign-test interval reaches LEVEL
#: (with six, the whole range covers the median with 1 - 2/64 = 96.9 %).
#: From there on the sign test must agree, so that one outlying pair cannot
#: carry a verdict the others do not share.
SIGN_PAIRS = 6
#: Level of the t-interval. Higher than the sign test's: it is formed from
#: as few as three pairs and assumes roughly normal log ratios, so its
#: nominal level is bought with width (the A/A benchmark holds it to 0 false
#: verdicts in 30 + 30 trials).
T_LEVEL = 0.99
#: Student's t 99.5 % quantiles by degrees of freedom (the standard library
#: has none); past the table, the normal's 2.576 and a small-sample term.
_T995 = {1: 63.657, 2: 9.925, 3: 5.841, 4: 4.604, 5: 4.032, 6: 3.707, 7: 3.499, 8: 3.355,
         9: 3.250, 10: 3.169, 11: 3.106, 12: 3.055, 13: 3.012, 14: 2.977, 15: 2.947,
         16: 2.921, 17: 2.898, 18: 2.878, 19: 2.861, 20: 2.845, 25: 2.787, 30: 2.750}
METHOD = "t-interval on the log of the paired ratios"
#: A run that kept less than this share of its configuration's usual CPU
#: seconds per wall second was slowed by other work (the cross-check).
DISTURBED = 0.75
#: Fewest undisturbed pairs the cross-check needs.
CROSS_CHECK_PAIRS = 3
#: Share of the usable CPUs used by other work from which a comparison
#: too short for an interval is called contended rather than inconclusive.
BUSY_SHARE = 0.5

VERDICTS = ("confirmed", "refuted", "inconclusive", "contended")


@dataclass(frozen=True)
class Protocol:
    """Minimums of one measured run; tests shrink them through the
    environment so that a whole suite stays fast."""

    warmup_min: int = 5
    batches_min: int = 30
    seconds_min: float = 2.0
    repeats: int = 5
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
            ("extra_rounds", "LOADLINT_VERIFY_EXTRA_ROUNDS", int),
        ):
            if env.get(key):
                values[name] = kind(env[key])
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def spread(values: Sequence[float]) -> float:
    """Relative range ``(max - min) / median`` of a candidate's runs (shown
    in the report; the decision uses the paired interval)."""
    if len(values) < 2:
        return 0.0
    mid = median(values)
    return (max(values) - min(values)) / mid if mid else math.inf


@dataclass(frozen=True)
class Run:
    """What the decision reads of one timed run.

    ``round`` pairs it with the current configuration's run of the same
    round (the runs of a round are interleaved, A B, B A, ...).
    ``utilisation`` is our CPU seconds (main process and workers) per wall
    second; ``cpu_per_batch`` our CPU seconds per batch; ``foreign_share``
    the share of the usable CPUs that other work used during the run.
    """

    round: int
    rate: float
    cpu_per_batch: float | None = None
    utilisation: float | None = None
    foreign_share: float | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any], index: int) -> "Run":
        """From a run record; records without a round are paired by order."""
        gate = d.get("gate") or {}
        return cls(round=int(d.get("round", index)), rate=float(d["rate"]),
                   cpu_per_batch=d.get("cpu_per_batch"), utilisation=d.get("utilisation"),
                   foreign_share=gate.get("foreign_share"))


def runs_of(records: Sequence[dict[str, Any]]) -> list[Run]:
    """:class:`Run` views of a candidate's run records."""
    return [Run.from_dict(r, i) for i, r in enumerate(records)]


@dataclass(frozen=True)
class Interval:
    """A distribution-free interval for a median: order statistics of the
    sample chosen by the exact sign test (binomial, p = 1/2)."""

    low: float
    high: float
    level: float
    n: int


def sign_interval(values: Sequence[float], level: float = LEVEL) -> Interval | None:
    """The exact sign-test interval for the median of ``values``: the k-th
    smallest and k-th largest value, k the largest order whose coverage
    ``1 - 2 P(B < k)``, B ~ Binomial(n, 1/2), still reaches ``level``.
    With fewer than :data:`MIN_PAIRS` values no k qualifies; the whole
    range is returned with its (lower) coverage."""
    n = len(values)
    if n == 0:
        return None
    ordered = sorted(values)
    k, coverage = 1, 1.0 - 2.0 * 0.5 ** n
    tail = 0.0
    for j in range(1, n // 2 + 1):
        tail += math.comb(n, j - 1) / 2.0 ** n  # P(B <= j - 1)
        if 1.0 - 2.0 * tail < level:
            break
        k, coverage = j, 1.0 - 2.0 * tail
    return Interval(ordered[k - 1], ordered[n - k], coverage, n)


def t_quantile(df: int) -> float:
    """Student's t 99.5 % quantile for ``df`` degrees of freedom (between
    table rows, the row below: a slightly wider interval)."""
    if df in _T995:
        return _T995[df]
    if df < 30:
        return _T995[max(k for k in _T995 if k <= df)]
    return 2.576 + 5.3 / df  # within 0.3 % of the exact value past 30


def t_interval(ratios: Sequence[float]) -> Interval | None:
    """The 99 % t-interval for the geometric mean of ``ratios``: ratios of
    rates multiply, so their logs are what is roughly normal and symmetric
    (a 2x gain and a 2x loss are equally far from 1). ``None`` with fewer
    than :data:`MIN_PAIRS` values or a non-positive ratio."""
    n = len(ratios)
    if n < MIN_PAIRS or min(ratios) <= 0:
        return None
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    half = t_quantile(n - 1) * statistics.stdev(logs) / math.sqrt(n)
    return Interval(math.exp(mean - half), math.exp(mean + half), T_LEVEL, n)


def pairs(current: Sequence[Run], candidate: Sequence[Run]) -> list[tuple[Run, Run]]:
    """The (current, candidate) runs of the same round, in round order."""
    mine = {r.round: r for r in current}
    return [(mine[b.round], b) for b in sorted(candidate, key=lambda r: r.round)
            if b.round in mine and mine[b.round].rate > 0]


def noise(current: Sequence[Run]) -> float:
    """The current configuration's drift from one round to the next: the
    median of ``|rate[i+1] / rate[i] - 1|``. An A/A comparison differs by
    about this much, so a gain must clear it."""
    rates = [r.rate for r in sorted(current, key=lambda r: r.round) if r.rate > 0]
    steps = [abs(b / a - 1.0) for a, b in zip(rates, rates[1:])]
    return median(steps) if steps else 0.0


@dataclass(frozen=True)
class Decision:
    verdict: str
    speedup: float  # median of the paired ratios (candidate / current)
    threshold: float
    noise: float
    pairs: int
    reason: str
    interval: Interval | None = None
    cpu_ratio: float | None = None  # median paired CPU time per batch, candidate / current


def _busy(pairs_: Sequence[tuple[Run, Run]]) -> float | None:
    shares = [r.foreign_share for p in pairs_ for r in p if r.foreign_share is not None]
    return median(shares) if shares else None


def _undisturbed(pairs_: list[tuple[Run, Run]], side: int) -> list[tuple[Run, Run]]:
    """Pairs whose run on ``side`` kept its usual CPU utilisation. Other
    work cannot change our CPU time per batch, only how much of the wall
    time we got to spend it: a run whose CPU seconds per wall second fell
    well below that configuration's usual was slowed by someone else."""
    known = [u for p in pairs_ if (u := p[side].utilisation)]
    if len(known) < len(pairs_):
        return pairs_
    # The upper quartile: the runs that other work slowed may be half of them.
    usual = sorted(known)[len(known) * 3 // 4]
    return [p for p in pairs_ if (p[side].utilisation or 0.0) >= DISTURBED * usual]


def decide(
    current: Sequence[Run],
    candidate: Sequence[Run],
    *,
    min_gain: float = MIN_GAIN,
    min_pairs: int = MIN_PAIRS,
    busy_share: float = BUSY_SHARE,
) -> Decision:
    """The paired rule on rates (higher is better).

    Each candidate run is paired with the current configuration's run of
    the same round; the speedup is the median of the paired ratios, with
    a t-interval at :data:`T_LEVEL` on their logs (from :data:`MIN_PAIRS`
    pairs, so that a large consistent gain is confirmed from few rounds).
    Confirmed when the interval lies above ``1 + max(min_gain, noise)``,
    refuted in the mirror case, inconclusive otherwise; from
    :data:`SIGN_PAIRS` pairs the exact sign test must agree on the side of 1. Cross-check on CPU time: the median ratio
    must also clear the threshold on the pairs where the run the verdict
    favours against (the current one for confirmed) was not slowed by
    other work. Contended only when
    too few pairs ran for an interval while other work used at least
    ``busy_share`` of the usable CPUs.
    """
    matched = pairs(current, candidate)
    drift = noise(current)
    threshold = 1.0 + max(min_gain, min(drift, MAX_NOISE_GAIN))
    ratios = [b.rate / a.rate for a, b in matched]
    cpu = [b.cpu_per_batch / a.cpu_per_batch for a, b in matched
           if a.cpu_per_batch and b.cpu_per_batch]
    cpu_ratio = median(cpu) if cpu else None
    speedup = median(ratios) if ratios else math.nan
    n = len(ratios)
    iv = t_interval(ratios) if n >= min_pairs else None
    if iv is None:
        busy = _busy(matched)
        if busy is not None and busy >= busy_share:
            return Decision("contended", speedup, threshold, drift, n,
                            f"other work used {busy:.0%} of the usable CPUs; {n} pair(s) ran, "
                            f"{min_pairs} are needed for an interval",
                            None, cpu_ratio)
        return Decision("inconclusive", speedup, threshold, drift, n,
                        f"{n} pair(s); {min_pairs} are needed for an interval",
                        None, cpu_ratio)
    span = f"{T_LEVEL:.0%} interval {iv.low:.2f}x-{iv.high:.2f}x over {n} pairs"

    def clear(ratio: float) -> bool:
        return ratio > threshold if side == 0 else ratio < 1.0 / threshold

    if iv.low > threshold:
        verdict, side = "confirmed", 0
    elif iv.high < 1.0 / threshold:
        verdict, side = "refuted", 1
    else:
        return Decision("inconclusive", speedup, threshold, drift, n,
                        f"{span} is not clear of the {threshold:.2f}x threshold", iv, cpu_ratio)
    sign = sign_interval(ratios) if n >= SIGN_PAIRS else None
    if sign is not None and not (sign.low > 1.0 if side == 0 else sign.high < 1.0):
        return Decision("inconclusive", speedup, threshold, drift, n,
                        f"{span}, but the exact sign test's {sign.level:.0%} interval "
                        f"{sign.low:.2f}x-{sign.high:.2f}x includes 1 (a few pairs carry the mean)",
                        iv, cpu_ratio)
    kept = _undisturbed(matched, side)
    if len(kept) < n:
        # A consistency check, not a second test: the undisturbed pairs'
        # median must clear the threshold too.
        ratio = median([b.rate / a.rate for a, b in kept]) if kept else math.nan
        if len(kept) < CROSS_CHECK_PAIRS or not clear(ratio):
            return Decision("inconclusive", speedup, threshold, drift, n,
                            f"{span}, but not the median of the {len(kept)} pairs whose "
                            f"{'current' if side == 0 else 'candidate'} run kept its usual "
                            "CPU time per wall second (others were slowed by other work)",
                            iv, cpu_ratio)
    above = "above" if verdict == "confirmed" else "below"
    return Decision(verdict, speedup, threshold, drift, n,
                    f"{span}, {above} the {threshold:.2f}x threshold", iv, cpu_ratio)


def favoured(current: Sequence[Run], candidate: Sequence[Run]) -> int:
    """How many pairs the candidate won (its rate above the current's)."""
    return sum(1 for a, b in pairs(current, candidate) if b.rate > a.rate)


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


def busy_share_limit() -> float:
    """:data:`BUSY_SHARE`, scaled like the gate's limits."""
    return min(1.0, BUSY_SHARE * float(os.environ.get("LOADLINT_VERIFY_GATE_SCALE") or 1.0))


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
