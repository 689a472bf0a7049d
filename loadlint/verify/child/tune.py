"""Finding a faster configuration: the adaptive search of the default run
and the exhaustive sweep of ``--tune``.

Both rank points by single runs, each after a run of the current
configuration; the verdict rests on the paired rounds that follow
(:meth:`Bench.benchmark`), where the best points return as ``tuned``
candidates.
"""

from __future__ import annotations

import time
from typing import Any

from loadlint.hardware import WORKER_MEMORY_BYTES
from loadlint.verify import measure
from loadlint.verify.child import identity
from loadlint.verify.child.bench import Bench

now = time.perf_counter

#: A loader that keeps less than this share of the CPUs it could use busy
#: is waiting (I/O, sleeps, locks): workers beyond the CPUs can still help.
WAITING = 0.5
#: How far past the usable CPUs a waiting loader's worker count may go.
OVERSUBSCRIBE = 4


def _rate(point: dict[str, Any]) -> float:
    return measure.median([r["rate"] for r in point.get("runs", [])]) if point.get("runs") else 0.0


def _score(point: dict[str, Any]) -> float:
    """A point's speedup over the current run just before it: the machine's
    load changes between runs, a ratio of neighbours much less."""
    ratios = [r["vs_current"] for r in point.get("runs", []) if r.get("vs_current")]
    return measure.median(ratios) if ratios else 0.0


def _nw(config: dict[str, Any]) -> int:
    return int(config.get("num_workers") or 0)


class Explorer:
    """Points measured on epochs of one length, each checked for the same data first
    and run right after a run of the current configuration (C P1 C P2 ...),
    so that each is ranked by its ratio to its neighbour."""

    def __init__(self, bench: Bench, current: dict[str, Any], calib: dict[str, Any],
                 seconds: float | None) -> None:
        self.bench = bench
        self.current = current
        self.points: list[dict[str, Any]] = []
        self.seconds = seconds
        self.epoch, _ = bench.prepare(current, calib, seconds)
        #: Wall seconds of each (current, point) pair: what a round costs.
        self.pair_s: list[float] = []
        self.reference = None if bench.iterable else bench.index_stream(current["config"], 100000)
        self.rounds = 0
        self.base: dict[str, Any] = {"name": "current", "config": current["config"], "runs": []}

    def run(self, point: dict[str, Any], seconds: float | None) -> dict[str, Any] | None:
        self.bench.state.progress("search", candidate=point["name"], points=len(self.points))
        run = self.bench.measure_run(point, self.epoch, self.rounds, seconds)
        self.rounds += 1
        return run

    def paired(self, point: dict[str, Any]) -> None:
        t0 = now()
        before = self.run(self.base, self.seconds)
        after = self.run(point, self.seconds)
        self.pair_s.append(now() - t0)
        if before is not None and after is not None and before["rate"] > 0:
            after["vs_current"] = after["rate"] / before["rate"]

    def probe(self, config: dict[str, Any], name: str) -> dict[str, Any] | None:
        """One run of ``config`` (None when it is current, changes the data
        or fails); a configuration already measured is not run again."""
        config = identity.normalise(config)
        key = identity.canon(config)
        if key == identity.canon(self.current["config"]):
            return None
        for p in self.points:
            if identity.canon(p["config"]) == key:
                return p if p.get("runs") else None
        point: dict[str, Any] = {"name": name, "config": config, "origin": "search", "runs": []}
        self.points.append(point)
        if self.reference is None:
            point["equivalence"] = identity.compare_iterable(
                self.bench.iterable_digests(self.current["config"], 30.0),
                self.bench.iterable_digests(config, 30.0))
        else:
            got, n = self.bench.index_stream(config, 100000)
            point["equivalence"] = identity.compare_streams(*self.reference, got, n, detail=False)
        if not point["equivalence"]["equivalent"]:
            return None
        self.paired(point)
        return point if point.get("runs") else None

    def sweep(self, best: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The points for the report; ``best`` are the finalists."""
        keys = {identity.canon(b["config"]) for b in best}
        return [{"name": p["name"], "config": p["config"],
                 "rate": _rate(p) if p.get("runs") else None,
                 "vs_current": _score(p) if p.get("runs") else None,
                 "equivalent": p["equivalence"]["equivalent"],
                 "how": p["equivalence"].get("how"),
                 "dropped": identity.canon(p["config"]) not in keys} for p in self.points]


def _ladder(limit: int) -> list[int]:
    """1, 2, 4, ... up to ``limit`` (included)."""
    return [n for n in measure.num_workers_sweep(limit) if n > 0]


def _max_workers(bench: Bench, run: dict[str, Any], config: dict[str, Any]) -> tuple[int, float, str]:
    """How far the worker count may go, from how busy the first run of the
    current configuration kept the CPUs it could use."""
    usable = max(1, int(bench.usable))
    could = min(usable, _nw(config) + 1)
    # Time spent waiting for a CPU is other work's doing, not the loader's.
    ran = run["wall_s"] - run["window"]["runq_wait_s"] / could
    busy = run["cpu_s"] / max(ran * could, 1e-9)
    if busy >= WAITING:
        return usable, busy, (f"a batch keeps {busy:.0%} of the CPUs busy: CPU-bound, "
                              f"num_workers up to the {usable} usable CPUs")
    limit = OVERSUBSCRIBE * usable
    memory = getattr(bench.profile, "memory_available")
    why = ""
    if memory:
        fits = max(1, int(memory // WORKER_MEMORY_BYTES))
        if fits < limit:
            limit, why = fits, f" (memory for {fits})"
    return limit, busy, (f"a batch keeps only {busy:.0%} of the CPUs busy: the loader waits, "
                         f"num_workers up to {limit}{why}")


def first_look(bench: Bench, current: dict[str, Any], phase: str, seconds: float | None
               ) -> tuple[dict[str, Any], int, float, str]:
    """A run of the current configuration (also the paired rounds'
    calibration) and what it says about how far to search."""
    bench.state.progress(phase, candidate="current", points=0)
    run = bench.run(current["config"], *bench.epoch_for(current["config"], 0), seconds)
    return (run, *_max_workers(bench, run, current["config"]))


def _finalists(cands: list[dict[str, Any]], best: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keep = list(cands)
    for i, p in enumerate(best):
        key = identity.canon(p["config"])
        twin = next((c for c in keep if identity.canon(c["config"]) == key), None)
        name = f"tuned{i + 1}"
        if twin is not None:
            if twin is not cands[0]:
                twin.setdefault("aliases", []).append(name)
            continue
        keep.append({"name": name, "config": p["config"], "origin": p["origin"],
                     "equivalence": p["equivalence"], "runs": [], "search_rate": _rate(p),
                     "search_vs_current": _score(p)})
    return keep


def search(bench: Bench, cands: list[dict[str, Any]], deadline: float
           ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """The default run's adaptive search, within ``deadline``: more workers
    while they help (past the CPUs when the loader waits), then persistent
    workers and a deeper prefetch on the two leaders. Returns the
    candidates with the best point added, the points, and what the search
    read from the first run."""
    current = cands[0]
    short = bench.protocol.seconds_min / 2
    first_run, limit, busy, why = first_look(bench, current, "search", short)
    ex = Explorer(bench, current, first_run, short)
    tries = [c for c in cands[1:] if c.get("origin") == "--try"]

    def time_left() -> bool:
        # Keep enough of the budget for the paired rounds, whose runs are
        # as long as the search's: a round is a (current, point) pair plus
        # a run per try and one for the suggestion (should it stay). The
        # costliest pair so far: the best point tends to have the most workers.
        pair = max(ex.pair_s) if ex.pair_s else 2 * first_run["wall_s"]
        round_s = pair * (1 + (len(tries) + 1) / 2)
        return now() + measure.MIN_PAIRS * round_s * 1.1 < deadline

    suggested = next((c for c in cands[1:] if c["name"] == "suggested"), None)
    if suggested is not None:
        ex.probe(suggested["config"], "suggested")

    leaders: list[dict[str, Any]] = []
    wanted = sorted(set(_ladder(limit)) | {_nw(c["config"]) for c in cands[1:] if _nw(c["config"])})
    for nw in wanted:
        if not time_left() and len(leaders) >= 2:
            break
        p = ex.probe(dict(current["config"], num_workers=nw, persistent_workers=False,
                          prefetch_factor=None), f"nw={nw}")
        if p is None:
            continue
        leaders.append(p)
        top = max(_score(q) for q in leaders)
        if measure.clearly_slower([_score(p)], [top]) and nw > 1:
            break  # past the peak: more workers will not rescue the branch
    leaders.sort(key=lambda p: -_score(p))
    for p in leaders[:2]:
        for persistent, pf in ((True, 2), (True, 4)):
            if not time_left():
                break
            ex.probe(dict(p["config"], persistent_workers=persistent, prefetch_factor=pf),
                     f"nw={_nw(p['config'])},pw={int(persistent)},pf={pf}")
    measured = [p for p in ex.points if _score(p)]
    best = sorted(measured, key=lambda p: -_score(p))[:1]
    if suggested is not None and best:
        # The suggestion joins the paired rounds only while it is in the
        # running: rounds spent on a clearly slower branch buy no answer.
        mine = next((p for p in measured if identity.canon(p["config"])
                     == identity.canon(identity.normalise(suggested["config"]))), None)
        if mine is not None and mine is not best[0] and measure.clearly_slower(
                [_score(mine)], [_score(best[0])]):
            suggested["dropped"] = (f"clearly slower than the best point in the search "
                                    f"({_score(mine):.2f}x against {_score(best[0]):.2f}x the "
                                    "current run before each)")
            suggested["search_rate"] = _rate(mine)
    info = {"busy_share": busy, "max_workers": limit, "reason": why,
            "points": len(ex.points), "calibration": first_run, "seconds": short}
    return _finalists(cands, best), ex.sweep(best), info


def sweep(bench: Bench, cands: list[dict[str, Any]]
          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """``--tune``: every worker count of the ladder (past the CPUs when the
    loader waits), then persistent_workers x prefetch_factor on the two
    best, one run each; the two best points become finalists."""
    current = cands[0]
    first_run, limit, busy, why = first_look(bench, current, "sweep", None)
    ex = Explorer(bench, current, first_run, None)
    by_nw = [p for nw in measure.num_workers_sweep(limit)
             if (p := ex.probe(dict(current["config"], num_workers=nw, persistent_workers=False,
                                    prefetch_factor=None), f"nw={nw}")) is not None]
    for p in sorted((q for q in by_nw if _nw(q["config"])), key=lambda q: -_score(q))[:2]:
        for persistent in (False, True):
            for pf in (2, 4):
                ex.probe(dict(p["config"], persistent_workers=persistent, prefetch_factor=pf),
                         f"nw={_nw(p['config'])},pw={int(persistent)},pf={pf}")
    best = sorted((p for p in ex.points if _score(p)), key=lambda p: -_score(p))[:2]
    info = {"busy_share": busy, "max_workers": limit, "reason": why, "points": len(ex.points),
            "calibration": first_run, "seconds": None}
    return _finalists(cands, best), ex.sweep(best), info
