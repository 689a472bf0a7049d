"""Finding a faster configuration: the adaptive search of the default run
and the exhaustive sweep of ``--tune``.

Both rank points by single runs, each after a run of the current
configuration; the verdict rests on the paired rounds that follow
(:meth:`Bench.benchmark`), where the best points return as ``tuned``
candidates.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

from loadlint.hardware.detect import WORKER_MEMORY_BYTES
from loadlint.verify import measure
from loadlint.verify.child import identity
from loadlint.verify.child.bench import Bench

now = time.perf_counter

#: A loader that keeps less than this share of the CPUs it could use busy
#: is waiting (I/O, sleeps, locks): workers beyond the CPUs can still help.
WAITING = 0.5
#: Most workers a waiting loader's search tries (memory and /dev/shm
#: permitting): a loader that waits is bounded by its wait, not the CPUs.
MAX_WORKERS = 128
#: Points ranked against one run of the configuration as written.
REF_EVERY = 3
#: A gain below this from one worker count to the next is a plateau.
PLATEAU = 1.05
#: Share of the free memory and /dev/shm the workers may take.
ROOM = 0.5


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
    and ranked by its ratio to the latest run of the current configuration,
    which runs once per round of :data:`REF_EVERY` points (C P1 P2 P3 C P4 ...)."""

    def __init__(self, bench: Bench, current: dict[str, Any], calib: dict[str, Any],
                 seconds: float | None) -> None:
        self.bench = bench
        self.current = current
        self.points: list[dict[str, Any]] = []
        self.seconds = seconds
        self.epoch, _ = bench.prepare(current, calib, seconds)
        self.reference = None if bench.iterable else bench.index_stream(current["config"], 100000)
        self.ref_digests: dict[str, Any] | None = None
        self.rounds = 0
        self.base: dict[str, Any] = {"name": "current", "config": current["config"], "runs": []}
        #: The latest reference run's rate, points measured since, and the
        #: wall seconds of every reference and point run (the plan's costs).
        self.ref_rate: float | None = None
        self.since_ref = 0
        self.ref_s: list[float] = []
        self.point_s: dict[str, float] = {}

    def reference_run(self) -> None:
        """A run of the configuration as written, which the next points
        are ranked against: one per round of points, not one per point (a
        slow call as written would eat the budget)."""
        t0 = now()
        run = self.run(self.base, self.seconds)
        self.ref_s.append(now() - t0)
        self.ref_rate = run["rate"] if run is not None and run["rate"] > 0 else None
        self.since_ref = 0

    def run(self, point: dict[str, Any], seconds: float | None) -> dict[str, Any] | None:
        self.bench.state.progress("search", candidate=point["name"], points=len(self.points))
        run = self.bench.measure_run(point, self.epoch, self.rounds, seconds)
        self.rounds += 1
        return run

    def paired(self, point: dict[str, Any]) -> None:
        if self.ref_rate is None or self.since_ref >= REF_EVERY:
            self.reference_run()
        t0 = now()
        after = self.run(point, self.seconds)
        self.point_s[point["name"]] = now() - t0
        self.since_ref += 1
        if after is not None and self.ref_rate:
            after["vs_current"] = after["rate"] / self.ref_rate

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
            if self.ref_digests is None:
                self.ref_digests = self.bench.iterable_digests(self.current["config"], 30.0)
            point["equivalence"] = identity.compare_iterable(
                self.ref_digests, self.bench.iterable_digests(config, 30.0))
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


def _free_shm() -> int | None:
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _max_workers(bench: Bench, run: dict[str, Any], config: dict[str, Any]) -> tuple[int, float, str]:
    """How far the worker count may go, from how busy the first run of the
    current configuration kept the CPUs it could use. A waiting loader's
    bound is memory (and what the search then measures per worker), not
    the CPUs."""
    usable = max(1, int(bench.usable))
    could = min(usable, _nw(config) + 1)
    # Time spent waiting for a CPU is other work's doing, not the loader's
    # (on a busy machine that wait can exceed the wall time: never less
    # than the CPU time itself ran).
    ran = max(run["wall_s"] - run["window"]["runq_wait_s"] / could, run["cpu_s"] / could, 1e-9)
    busy = min(1.0, run["cpu_s"] / (ran * could))
    if busy >= WAITING:
        return 2 * usable, busy, (f"a batch keeps {busy:.0%} of the CPUs busy: CPU-bound, "
                                  f"num_workers from the {usable} usable CPUs, more only while "
                                  "the rate rises")
    limit = MAX_WORKERS
    memory = getattr(bench.profile, "memory_available")
    why = ""
    if memory:
        # A first guess for the first probe; measured PSS replaces it.
        fits = max(1, int(memory * ROOM // (WORKER_MEMORY_BYTES // 4)))
        if fits < limit:
            limit, why = fits, f" (memory for {fits})"
    return limit, busy, (f"a batch keeps only {busy:.0%} of the CPUs busy: the loader waits, "
                         f"num_workers doubled while throughput rises, up to {limit}{why}")


def _room(bench: Bench, point: dict[str, Any]) -> int | None:
    """Workers that fit in :data:`ROOM` of the free memory and /dev/shm,
    from the worker memory and shared-memory growth ``point`` measured."""
    runs = point.get("runs") or []
    nw = _nw(point["config"])
    if not runs or not nw:
        return None
    fits: list[int] = []
    pss_ = max((r.get("worker_pss") or 0) for r in runs)
    memory = getattr(bench.profile, "memory_available")
    if pss_ and memory:
        fits.append(int(memory * ROOM / (pss_ / nw)))
    shm = max((r.get("shm_growth") or 0) for r in runs)
    free = _free_shm()
    if shm > 0 and free:
        fits.append(int(free * ROOM / (shm / nw)))
    return max(1, min(fits)) if fits else None


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


class Plan:
    """The budget's plan: what the proof (the paired rounds) will cost, from
    the runs so far, and whether the search may spend more."""

    def __init__(self, bench: Bench, ex: Explorer, first: dict[str, Any], deadline: float,
                 extra: int) -> None:
        self.ex = ex
        self.first_s = float(first["wall_s"])
        self.deadline = deadline
        self.extra = extra  # candidates beyond current and the best point (tries)
        self.rounds = max(measure.MIN_PAIRS, bench.protocol.repeats)

    def round_s(self, leaders: list[dict[str, Any]]) -> float:
        """One paired round: the current run, the leader's, one per try."""
        ref = max(self.ex.ref_s) if self.ex.ref_s else self.first_s
        point = max((self.ex.point_s.get(p["name"], ref) for p in leaders[:1]), default=ref)
        return ref + point * (1 + self.extra)

    def proof_s(self, leaders: list[dict[str, Any]], rounds: int | None = None) -> float:
        return (rounds or self.rounds) * self.round_s(leaders) * 1.1

    def affords(self, leaders: list[dict[str, Any]], next_s: float) -> bool:
        """Room for one more point (``next_s`` seconds) and the planned
        proof. The first point is always measured: without one there is
        nothing to prove (a budget too short says so in a note)."""
        left = self.deadline - now()
        return not leaders or left > next_s + self.proof_s(leaders)


def _ranked(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((p for p in points if _score(p)), key=lambda p: -_score(p))


def search(bench: Bench, cands: list[dict[str, Any]], deadline: float
           ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """The default run's adaptive search, within ``deadline`` less what
    the proof needs: the worker count first (a waiting loader: high first,
    doubling while the rate rises and memory permits, then a bisection;
    CPU-bound: the usable CPUs first, then fewer), then persistent workers
    and a deeper prefetch on the leader. Returns the candidates with the
    best point added, the points, and what the search read from the first run."""
    current = cands[0]
    short = bench.protocol.seconds_min / 2
    first_run, limit, busy, why = first_look(bench, current, "search", short)
    ex = Explorer(bench, current, first_run, short)
    tries = [c for c in cands[1:] if c.get("origin") == "--try"]
    plan = Plan(bench, ex, first_run, deadline, len(tries))
    usable = max(1, int(bench.usable))
    waiting = busy < WAITING
    by_nw: dict[int, dict[str, Any]] = {}
    stopped = ""

    def leaders() -> list[dict[str, Any]]:
        return _ranked(ex.points)

    def cost(nw: int) -> float:
        # A point costs about a run of the nearest worker count measured.
        near = min(by_nw, key=lambda k: abs(k - nw), default=None)
        known = ex.point_s.get(by_nw[near]["name"]) if near is not None else None
        return (known or plan.first_s) + (0.0 if ex.since_ref < REF_EVERY else plan.first_s)

    #: The keywords every worker-count point shares: plain first, then
    #: persistent workers once they measured faster on the leader.
    variant: dict[str, Any] = {"persistent_workers": False, "prefetch_factor": None}

    def probe_nw(nw: int) -> dict[str, Any] | None:
        nonlocal stopped
        if nw in by_nw or nw < 1:
            return by_nw.get(nw)
        if not plan.affords(leaders(), cost(nw)):
            stopped = stopped or "the budget's share for the search was spent"
            return None
        pw = variant["persistent_workers"]
        p = ex.probe(dict(current["config"], num_workers=nw, **variant),
                     f"nw={nw}" + (",pw=1,pf=2" if pw else ""))
        if p is not None:
            by_nw[nw] = p
        return p

    suggested = next((c for c in cands[1:] if c["name"] == "suggested"), None)
    # The most promising point first (the suggestion is a guess).
    if waiting:
        _climb(by_nw, probe_nw, start=min(limit, max(8, 4 * usable)), limit=limit,
               room=lambda p: _room(bench, p))
    else:
        _climb(by_nw, probe_nw, start=usable, limit=limit, room=lambda p: None)
    plain = dict(by_nw)
    if plain:
        # Persistent workers on the leader before the bisection: with many
        # workers their start at every epoch is often the largest cost left.
        nw = _best_nw(plain)
        lead = plain[nw]
        if plan.affords(leaders(), ex.point_s.get(lead["name"], plan.first_s)):
            p = ex.probe(dict(lead["config"], persistent_workers=True, prefetch_factor=2),
                         f"nw={nw},pw=1,pf=2")
            if p is not None and _score(p) > _score(lead):
                variant = {"persistent_workers": True, "prefetch_factor": 2}
                by_nw = {nw: p}
        else:
            stopped = stopped or "the budget's share for the search was spent"
        _bisect(plain, probe_nw)
    if suggested is not None and plan.affords(leaders(), plan.first_s):
        ex.probe(suggested["config"], "suggested")
    lead = next((p for p in leaders() if _nw(p["config"])), None)
    if lead is not None and lead["config"].get("prefetch_factor") != 4:
        nw = _nw(lead["config"])
        if plan.affords(leaders(), ex.point_s.get(lead["name"], plan.first_s)):
            pw = bool(lead["config"].get("persistent_workers"))
            ex.probe(dict(lead["config"], prefetch_factor=4), f"nw={nw},pw={int(pw)},pf=4")
        else:
            stopped = stopped or "the budget's share for the search was spent"
    measured = [p for p in ex.points if _score(p)]
    best = _ranked(measured)[:1]
    if suggested is not None and best:
        # The suggestion joins the paired rounds only while it is in the
        # running: rounds spent on a clearly slower branch buy no answer.
        mine = next((p for p in measured if identity.canon(p["config"])
                     == identity.canon(identity.normalise(suggested["config"]))), None)
        if mine is not None and mine is not best[0] and measure.clearly_slower(
                [_score(mine)], [_score(best[0])]):
            suggested["dropped"] = (f"clearly slower than the best point in the search "
                                    f"({_score(mine):.2f}x against {_score(best[0]):.2f}x the "
                                    "current run of its round)")
            suggested["search_rate"] = _rate(mine)
    minimal = plan.first_s + plan.proof_s(best, measure.MIN_PAIRS) + sum(ex.point_s.values())
    if bench.state.budget_s and minimal > bench.state.budget_s:
        bench.state.notes.append(
            f"--budget {bench.state.budget_s:g} s is short for this loader: a search point "
            f"and {measure.MIN_PAIRS} paired rounds need about {minimal:.0f} s "
            f"(try --budget {math.ceil(minimal * 1.2 / 10) * 10:g})")
    info = {"busy_share": busy, "max_workers": limit, "reason": why,
            "points": len(ex.points), "calibration": first_run, "seconds": short,
            "reference_runs": len(ex.ref_s), "stopped": stopped or None}
    return _finalists(cands, best), ex.sweep(best), info


def _climb(by_nw: dict[int, dict[str, Any]], probe: Any, *, start: int, limit: int,
           room: Any) -> None:
    """The worker count: ``start`` first, then doubling while the rate
    rises by :data:`PLATEAU` and ``room`` (workers that fit, from the last
    point's memory) permits, or halving when ``start`` was already past the
    top. Stops only on a measured plateau (or the budget)."""
    first = probe(start)
    if first is None:
        return
    up = start
    while up < limit:
        nxt = min(limit, up * 2)
        fits = room(by_nw[up])
        if fits is not None and nxt > fits:
            nxt = fits
        if nxt <= up:
            break
        p = probe(nxt)
        if p is None or _score(p) < PLATEAU * _score(by_nw[up]):
            break
        up = nxt
    down = start
    if _best_nw(by_nw) == start:
        while down > 1:
            p = probe(max(1, down // 2))
            if p is None or _score(p) < PLATEAU * _score(by_nw[down]):
                break
            down = max(1, down // 2)


def _bisect(plain: dict[int, dict[str, Any]], probe: Any) -> None:
    """One bisection step from the best worker count toward each of its
    measured neighbours (``plain``: the climb's points), with the keywords
    ``probe`` now uses."""
    best = _best_nw(plain)
    lower = max((n for n in plain if n < best), default=None)
    upper = min((n for n in plain if n > best), default=None)
    for other in (upper, lower):
        if other is not None and abs(other - best) > 1:
            probe((other + best) // 2)


def _best_nw(by_nw: dict[int, dict[str, Any]]) -> int:
    return max(by_nw, key=lambda n: _score(by_nw[n]))


def sweep(bench: Bench, cands: list[dict[str, Any]]
          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """``--tune``: every worker count of the ladder (past the CPUs, up to
    32, when the loader waits), then persistent_workers x prefetch_factor
    on the two best, one run each; the two best points become finalists."""
    current = cands[0]
    first_run, limit, busy, why = first_look(bench, current, "sweep", None)
    ex = Explorer(bench, current, first_run, None)
    by_nw = [p for nw in measure.num_workers_sweep(min(limit, 32))
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
