"""``--tune``: sweep ``num_workers``, then ``persistent_workers`` x
``prefetch_factor`` on the best worker counts, and hand the finalists to the
full protocol."""

from __future__ import annotations

from typing import Any

from loadlint.verify import measure
from loadlint.verify.child import identity
from loadlint.verify.child.bench import Bench


def _median_rate(point: dict[str, Any]) -> float:
    return measure.median([r["rate"] for r in point["runs"]])


def tune(bench: Bench, cands: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One run per point, dropping clearly slower branches; returns the
    candidates with the finalists added, and the sweep for the report."""
    current = cands[0]
    plan = bench.plan(max(bench.protocol.warmup(n, 4) + bench.protocol.measured(n)
                          for n in measure.num_workers_sweep(bench.usable)))
    limit = None
    if bench.iterable:
        limit = bench.iterable_limit(bench.protocol.warmup(bench.usable, 4)
                                     + bench.protocol.measured(bench.usable))
    points: list[dict[str, Any]] = []
    reference = None if bench.iterable else bench.index_stream(current["config"], 100000)

    def probe(config: dict[str, Any], name: str) -> dict[str, Any] | None:
        config = identity.normalise(config)
        for p in [current, *points]:
            if identity.canon(p["config"]) == identity.canon(config):
                return p if p is not current else None
        point: dict[str, Any] = {"name": name, "config": config, "origin": "--tune", "runs": []}
        if reference is None:
            point["equivalence"] = identity.compare_iterable(
                bench.iterable_digests(current["config"], 30.0),
                bench.iterable_digests(config, 30.0))
        else:
            got, n = bench.index_stream(config, 100000)
            point["equivalence"] = identity.compare_streams(*reference, got, n, detail=False)
        if not point["equivalence"]["equivalent"]:
            points.append(point)
            return None
        bench.run_gated(point, plan, limit)
        points.append(point)
        return point

    bench.state.progress("tune")
    bench.run_gated(current, plan, limit)
    best_rates = current["runs"] and [current["runs"][0]["rate"]] or []
    by_nw: dict[int, dict[str, Any]] = {}
    for nw in measure.num_workers_sweep(bench.usable):
        cfg = dict(current["config"], num_workers=nw, persistent_workers=False,
                   prefetch_factor=None)
        p = probe(cfg, f"nw={nw}")
        if p is None or not p.get("runs"):
            continue
        by_nw[nw] = p
        rates = [r["rate"] for r in p["runs"]]
        if best_rates and measure.clearly_slower(rates, best_rates) and nw > 1:
            break  # more workers will not rescue a slower branch
        if not best_rates or measure.median(rates) > measure.median(best_rates):
            best_rates = rates
    ranked = sorted((p for nw, p in by_nw.items() if nw > 0 and p.get("runs")),
                    key=lambda p: -_median_rate(p))[:2]
    for p in ranked:
        nw = p["config"]["num_workers"]
        for persistent in (False, True):
            for pf in (2, 4):
                cfg = dict(current["config"], num_workers=nw, persistent_workers=persistent,
                           prefetch_factor=pf)
                q = probe(cfg, f"nw={nw},pw={int(persistent)},pf={pf}")
                if q is None or not q.get("runs"):
                    continue
                rates = [r["rate"] for r in q["runs"]]
                if measure.median(rates) > measure.median(best_rates):
                    best_rates = rates
    live = [p for p in points if p.get("runs") and not measure.clearly_slower(
        [r["rate"] for r in p["runs"]], best_rates)]
    live.sort(key=lambda p: -_median_rate(p))
    finalists = [dict(p, runs=[], contended_runs=[], name=f"tuned{i + 1}")
                 for i, p in enumerate(live[:2])]
    for f in finalists:
        f.pop("contended_out", None)
    # The sweep's single runs only rank the points; the verdict rests on
    # fresh rotated rounds.
    current["runs"] = []
    current["contended_runs"] = []
    current.pop("contended_out", None)
    sweep = [{"name": p["name"], "config": p["config"],
              "rate": _median_rate(p) if p.get("runs") else None,
              "equivalent": p["equivalence"]["equivalent"],
              "dropped": p not in live} for p in points]
    keep = list(cands)
    for f in finalists:
        if all(identity.canon(f["config"]) != identity.canon(c["config"]) for c in keep):
            keep.append(f)
    return keep, sweep
