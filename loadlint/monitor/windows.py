"""How ``--tune`` measures one configuration: how long a window lasts,
and what a fresh start of its workers costs over the rest of a run."""

from __future__ import annotations

from typing import Any

#: A window lasts at least this many batches and this long.
WINDOW_S = 0.25
MIN_BATCHES = 2
#: A candidate's window: candidates are fast where it matters, and a short
#: run must not spend its batches on the search.
CANDIDATE_S = 0.1


def window_done(w: dict[str, Any]) -> bool:
    """In order, batch k comes from worker k mod num_workers, so the
    arrivals repeat every num_workers batches: workers waiting on the same
    storage deliver in bursts, workers past the CPUs in turns.  A window
    counts whole rounds of its workers; part of one would put it inside
    a burst (too fast) or across a gap (too slow)."""
    least = WINDOW_S if w["config"] == 0 else CANDIDATE_S
    rounds = max(1, int(w["workers"]))
    n = int(w["n"])
    return n >= max(MIN_BATCHES, rounds) and n % rounds == 0 and float(w["elapsed"]) >= least


def amortized(took: float, workers: int, rate: float, batches: int) -> float:
    """The share of ``batches`` (a horizon) spent loading at the steady
    ``rate``, when the workers start first.  The first batch of a fresh
    start came ``took`` seconds after it; at the steady rate a round of
    ``workers`` batches takes ``workers / rate``: the rest is lost."""
    if rate <= 0 or batches <= 0:
        return 1.0
    lost = max(0.0, took - workers / rate)
    horizon = batches / rate
    return horizon / (horizon + lost)
