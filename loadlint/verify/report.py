"""Turn raw shim results into the verify report: text, JSON and a plot.

JSON schema (``"schema": "loadlint.verify/1"``)::

    {
      "schema": "loadlint.verify/1",
      "loadlint": "0.1.0",
      "date": "2026-12-04",                         # UTC; fix --from-verify writes it in its mark
      "mode": "loader" | "step" | "in-situ" | "ddp",
      "command": ["python", "train.py", ...],      # what was executed
      "machine": {usable_cpus, affinity_cpus, cgroup_cpus, loadavg,
                  busy_share, steal_share, start_method, start_method_origin,
                  torch_threads, omp_num_threads, shm_free, memory_available,
                  python, torch, cuda, gpu_count},
      "ceiling": {"usable_cpus": 2, "max_speedup": 2.0, "text": "...",
                  "excess": "why a candidate measured more" | null},
      "call_sites": [                               # one per measured call
        {
          "file": "train.py", "line": 42, "end_line": 45,  # 1-based, inclusive
          "class": "torch.utils.data.dataloader.DataLoader",
          "verdict": "confirmed" | "refuted" | "inconclusive" | "contended",
          "reason": "...",
          "winner": "suggested" | "try" | "tuned1" | ... | null,
          "speedup": 1.84 | null,               # winner (or the best other) vs current:
                                                # median of the paired ratios
          "compared": "tuned1" | null,          # the candidate the verdict is about
          "decision": {...} | null,             # its decision (below)
          "epoch_s": {"current": 4.3, "best": 1.2},  # projected epoch, before and after
          # What `loadlint fix --from-verify` writes. The tunable keywords
          # (num_workers, prefetch_factor, persistent_workers, pin_memory,
          # multiprocessing_context, timeout, in_order, pin_memory_device)
          # of the best configuration whose value differs from DataLoader's
          # default; a tunable keyword absent from "best" must be absent from
          # the call (or have its default). "best" is the current
          # configuration unless a candidate was confirmed faster.
          "best": {"num_workers": 2, "persistent_workers": true},
          "changes": {"num_workers": 2, ...},    # best vs the call as written
          "removed": ["prefetch_factor"],        # keywords to drop from the call
          "rate_unit": "epochs/s" | "batches/s" | "steps/s",
          "candidates": [
            {"name", "origin", "config", "equivalence": {"equivalent", "how"},
             "error": null | {"type", "message"},
             "n", "median_rate", "spread", "median_epoch_s", "median_ttfb_s",
             "median_steady_bps", "median_cpu_s", "median_worker_pss",
             "median_shm_growth", "data_wait_share", "contended_runs",
             "busy_share", "median_cpu_per_batch",
             "decision": {"verdict", "speedup", "threshold", "reason", "pairs",
                          "interval": [low, high], "level", "method", "noise",
                          "cpu_ratio"} | null,
             "runs": [{"rate", "epoch_s", "ttfb_s", "steady_bps", "cpu_s",
                       "worker_pss", "shm_growth", "data_wait_share",
                       "blocked_share", "gpu_util_mean", "gate", "round",
                       "cpu_per_batch", "utilisation"}]}
          ],
          "findings": ["correctness findings: candidates that change the data"],
          "sweep": [...] | absent,              # search or --tune points
          "search": {"mode", "busy_share", "max_workers", "reason", ...} | absent
        }
      ],
      "cuda": {"measured": false, "reason": "no CUDA device: ..."}
              | {"measured": true, "pageable_gbps": x, "pinned_gbps": y},
      "gpu": {"sampled": false, "reason": "..."} | {"sampled": true, ...},
      "distributed": null | {"nproc", "verdict": "pass" | "fail", "checks": [...],
                             "simulated": bool, ...},
      "notes": ["..."]
    }
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

from loadlint.facts.signature import TUNABLE_DEFAULTS
from loadlint.sources.source import visible_json
from loadlint.verify import measure
from loadlint.verify.text import format_config, render_ddp_text, render_text

__all__ = ["PlotUnavailable", "build_report", "format_config", "plot", "render_ddp_text",
           "render_json", "render_text"]

SCHEMA = "loadlint.verify/1"


# --------------------------------------------------------------------------
# Analysis
# --------------------------------------------------------------------------


def _med(values: list[Any]) -> float | None:
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return measure.median(values) if values else None


def _run_summary(run: dict[str, Any], real_len: int | None, mode: str) -> dict[str, Any]:
    if mode == "in-situ":
        return {
            "rate": run["rate"], "steps": run["steps"], "seconds": run["seconds"],
            "blocked_share": run["blocked_s"] / run["seconds"] if run["seconds"] else None,
            "gpu_util_mean": (run.get("gpu") or {}).get("mean"),
            "gpu_util_stdev": (run.get("gpu") or {}).get("stdev"),
            "gpu_series": (run.get("gpu") or {}).get("series"),
            "cpu_s": run["window"]["our_cpu_s"], "gate": run.get("gate"),
            "round": run.get("round"), "cpu_per_batch": run.get("cpu_per_batch"),
            "utilisation": run.get("utilisation"),
        }
    steady = run["steady_batches"] / run["steady_s"] if run["steady_s"] > 0 else None
    later = [e["start_s"] for e in run["epochs"][1:] if e["start_s"] is not None]
    return {
        "rate": run["rate"],
        "epoch_s": 1.0 / run["rate"] if real_len and run["rate"] else None,
        "ttfb_s": run["ttfb_s"],
        "restart_s": _med(later),
        "steady_bps": steady,
        "cpu_s": run["cpu_s"],
        "worker_pss": run["worker_pss"],
        "shm_growth": run["shm_growth"],
        "data_wait_share": run["data_wait_s"] / run["steady_s"] if run["steady_s"] else None,
        "h2d": run.get("h2d"),
        "gate": run.get("gate"),
        "round": run.get("round"),
        "cpu_per_batch": run.get("cpu_per_batch"),
        "utilisation": run.get("utilisation"),
        "gpu_util_mean": (run.get("gpu") or {}).get("mean"),
        "gpu_util_stdev": (run.get("gpu") or {}).get("stdev"),
        "gpu_series": (run.get("gpu") or {}).get("series"),
    }


def build_report(raw: dict[str, Any], *, mode: str, command: list[str],
                 version: str = "") -> dict[str, Any]:
    """Build the report from a bench/capture result (``raw``); in-situ runs
    arrive already attached to ``raw["candidates"][i]["runs"]``."""
    pre = raw.get("preflight", {})
    call = raw["call"]
    real_len = call.get("len") if not call.get("iterable") else call.get("len")
    cands = raw.get("candidates", [])
    usable = pre.get("usable_cpus") or 1
    summaries = []
    current = cands[0] if cands else None
    cur_runs = measure.runs_of((current or {}).get("runs", []))
    findings = []
    for c in cands:
        runs = [_run_summary(r, real_len, mode) for r in c.get("runs", [])]
        rates = [r["rate"] for r in runs]
        eq = c.get("equivalence") or {}
        s = {
            "name": c["name"], "origin": c.get("origin"), "aliases": c.get("aliases", []),
            "config": c["config"], "equivalence": eq, "error": c.get("error"),
            "n": len(runs), "median_rate": _med(rates), "spread": measure.spread(rates) if rates else None,
            "median_epoch_s": _med([r.get("epoch_s") for r in runs]),
            "median_ttfb_s": _med([r.get("ttfb_s") for r in runs]),
            "median_restart_s": _med([r.get("restart_s") for r in runs]),
            "median_steady_bps": _med([r.get("steady_bps") for r in runs]),
            "median_cpu_s": _med([r.get("cpu_s") for r in runs]),
            "median_worker_pss": _med([r.get("worker_pss") for r in runs]),
            "median_shm_growth": _med([r.get("shm_growth") for r in runs]),
            "data_wait_share": _med([r.get("data_wait_share") or r.get("blocked_share")
                                     for r in runs]),
            "gpu_util_mean": _med([r.get("gpu_util_mean") for r in runs]),
            "gpu_util_stdev": _med([r.get("gpu_util_stdev") for r in runs]),
            # Runs the contention gate flags are kept (the paired decision
            # copes with load); these say how busy the machine was.
            "contended_runs": sum(1 for r in c.get("runs", []) if (r.get("gate") or {}).get("contended")),
            "contended_evidence": [r["gate"].get("reason") for r in c.get("runs", [])
                                   if (r.get("gate") or {}).get("contended")][:5],
            "busy_share": _med([(r.get("gate") or {}).get("foreign_share") for r in c.get("runs", [])]),
            "median_cpu_per_batch": _med([r.get("cpu_per_batch") for r in c.get("runs", [])]),
            "h2d_gbps": _med([r["h2d"]["bytes"] / r["h2d"]["seconds"] / 1e9
                              for r in runs if r.get("h2d") and r["h2d"]["seconds"]]),
            "runs": runs,
            "decision": None,
        }
        if current is not None and c is not current:
            if eq and not eq.get("equivalent", True):
                findings.append(f"{c['name']} ({format_config(c['config'], current['config'])}) "
                                f"changes the data: {eq.get('how')}")
                s["decision"] = {"verdict": "rejected", "speedup": None, "threshold": None,
                                 "reason": "not equivalent: " + str(eq.get("how"))}
            elif c.get("error"):
                findings.append(f"{c['name']} failed: {c['error']['type']}: {c['error']['message']}")
                s["decision"] = {"verdict": "failed", "speedup": None, "threshold": None,
                                 "reason": f"{c['error']['type']}: {c['error']['message']}"}
            elif c.get("dropped"):
                s["decision"] = {"verdict": "dropped", "speedup": None, "threshold": None,
                                 "reason": c["dropped"]}
            else:
                s["decision"] = _decision(cur_runs, measure.runs_of(c.get("runs", [])))
        summaries.append(s)
    for p in raw.get("sweep") or []:
        if not p["equivalent"] and current is not None:
            findings.append(f"{p['name']} ({format_config(p['config'], current['config'])}) "
                            f"changes the data: {p.get('how')}")
    site = _site_verdict(summaries)
    best_cfg = current["config"] if current else {}
    winner = site.pop("winner_summary")
    if winner is not None:
        best_cfg = winner["config"]
    cur_cfg = current["config"] if current else {}
    best = {k: v for k, v in best_cfg.items() if k in TUNABLE_DEFAULTS and v != TUNABLE_DEFAULTS[k]}
    if best.get("num_workers") and best.get("prefetch_factor") == 2 and not cur_cfg.get("prefetch_factor"):
        best.pop("prefetch_factor")
    changes = {k: v for k, v in best.items() if cur_cfg.get(k) != v}
    removed = [k for k, v in cur_cfg.items()
               if k in TUNABLE_DEFAULTS and v != TUNABLE_DEFAULTS[k] and k not in best]
    ceil = float(usable)
    site_dict = {
        "file": call["file"], "line": call["line"], "end_line": call["end_line"],
        "class": call.get("class"), "dataset": call.get("dataset"),
        "batch_size": call.get("batch_size"), "len": call.get("len"),
        "iterable": call.get("iterable"),
        **site,
        "best": best, "changes": changes, "removed": removed,
        "rate_unit": "steps/s" if mode == "in-situ" else ("epochs/s" if real_len else "batches/s"),
        "candidates": summaries,
        "findings": findings,
    }
    if summaries and mode != "in-situ":
        chosen = winner or summaries[0]
        site_dict["epoch_s"] = {"current": summaries[0]["median_epoch_s"],
                                "best": chosen["median_epoch_s"]}
    if raw.get("sweep"):
        site_dict["sweep"] = raw["sweep"]
    if raw.get("search"):
        site_dict["search"] = raw["search"]
    report = {
        "schema": SCHEMA,
        "loadlint": version,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "mode": mode,
        "command": command,
        "machine": pre,
        "ceiling": _ceiling(usable, ceil, pre, summaries),
        "call_sites": [site_dict],
        "cuda": _cuda_section(raw, pre),
        "gpu": _gpu_section(mode, summaries, pre),
        "distributed": None,
        "notes": list(raw.get("notes", [])),
        "bench": {k: v for k, v in (raw.get("bench") or {}).items() if k != "calibration"},
    }
    return report


def _ceiling(usable: int, ceil: float, pre: dict[str, Any], summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """What parallel loading can give at most, and, when a candidate measured
    more, why: the bound holds for the same CPU time per batch, and the
    measured CPU time says where the rest came from."""
    text = (f"at most {ceil:.1f}x on {usable} usable CPU{'s' * (usable != 1)} for CPU-bound loading at the "
            "same CPU time per batch (loaders that wait on I/O can exceed it)")
    out: dict[str, Any] = {"usable_cpus": usable, "max_speedup": ceil, "text": text, "excess": None}
    measured = [(c["decision"]["speedup"], c) for c in summaries[1:]
                if c.get("decision") and c["decision"].get("speedup")]
    if not summaries or not measured:
        return out
    speedup, best = max(measured, key=lambda pair: pair[0])
    if speedup <= ceil:
        return out
    current = summaries[0]["config"]
    reasons = []
    cpu_ratio = best["decision"].get("cpu_ratio")
    bound = ceil
    if cpu_ratio and cpu_ratio < 1:
        bound = ceil / cpu_ratio
        causes = []
        threads = pre.get("torch_threads") or 1
        if not current.get("num_workers") and threads > 1:
            # Measured as the training process runs it: the same torch thread count.
            causes.append(f"the call as written loads in the training process, measured with its {threads} torch "
                          "intra-op threads, which contend for the same CPUs item by item (a worker runs one)")
        if best["config"].get("persistent_workers") and not current.get("persistent_workers") and current.get("num_workers"):
            causes.append("persistent workers are not started again at every epoch")
        reasons.append(f"{best['name']} spent {cpu_ratio:.2f}x the CPU time per batch of the call as written"
                       + (f" ({'; '.join(causes)})" if causes else "")
                       + f", which raises the bound to {bound:.1f}x")
    if speedup > bound * 1.1:
        # More than the CPUs and the CPU time saved explain: the call as written leaves CPUs idle.
        reasons.append("the call as written leaves the CPUs idle while it waits (storage, a network, a sleep), "
                       "and workers overlap the waits")
    out["excess"] = f"{best['name']} measured {speedup:.2f}x, above it: " + "; ".join(reasons)
    return out


def _decision(current: list[measure.Run], candidate: list[measure.Run]) -> dict[str, Any]:
    d = measure.decide(current, candidate, busy_share=measure.busy_share_limit())
    iv = d.interval
    return {"verdict": d.verdict, "speedup": None if math.isnan(d.speedup) else d.speedup,
            "threshold": d.threshold, "reason": d.reason, "pairs": d.pairs, "noise": d.noise,
            "interval": None if iv is None else [iv.low, iv.high],
            "level": None if iv is None else iv.level,
            "method": measure.METHOD, "cpu_ratio": d.cpu_ratio,
            "favoured": measure.favoured(current, candidate)}


def _site_verdict(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    others = [s for s in summaries[1:] if s["decision"]]
    comparable = [s for s in others
                  if s["decision"]["verdict"] not in ("rejected", "failed", "dropped")]
    confirmed = [s for s in comparable if s["decision"]["verdict"] == "confirmed"]

    def gain(s: dict[str, Any]) -> float:
        return float(s["decision"]["speedup"] or 0.0)

    def verdict(kind: str, s: dict[str, Any] | None, reason: str | None = None) -> dict[str, Any]:
        return {"verdict": kind, "winner": s["name"] if s and kind == "confirmed" else None,
                "compared": s["name"] if s else None,
                "speedup": s["decision"]["speedup"] if s else None,
                "reason": reason or (f"{s['name']}: {s['decision']['reason']}" if s else ""),
                "decision": s["decision"] if s else None,
                "winner_summary": s if kind == "confirmed" else None}

    if confirmed:
        return verdict("confirmed", max(confirmed, key=gain))
    if not comparable:
        why = "nothing to compare: " + ("every other candidate was rejected or failed"
                                        if others else "the suggestion is the current configuration")
        return verdict("inconclusive", None, why)
    contended = [s for s in comparable if s["decision"]["verdict"] == "contended"]
    if contended:
        top = max(contended, key=gain)
        return verdict("contended", top, f"{top['name']}: {top['decision']['reason']}; rerun on "
                                         "a quieter machine or with a larger --budget")
    best = max(comparable, key=gain)
    if all(s["decision"]["verdict"] == "refuted" for s in comparable):
        return verdict("refuted", best)
    return verdict("inconclusive", best)


def _cuda_section(raw: dict[str, Any], pre: dict[str, Any]) -> dict[str, Any]:
    cuda = raw.get("cuda")
    if not pre.get("cuda"):
        return {"measured": False, "reason": "no CUDA device: host-to-device copy not measured"}
    if not cuda:
        return {"measured": False, "reason": "host-to-device copy not measured"}
    return {"measured": True, "pageable_gbps": cuda["pageable"]["gbps"],
            "pinned_gbps": cuda["pinned"]["gbps"], "batch_bytes": cuda["pinned"]["bytes"]}


def _gpu_section(mode: str, summaries: list[dict[str, Any]], pre: dict[str, Any]) -> dict[str, Any]:
    if any(s.get("gpu_util_mean") is not None for s in summaries):
        return {"sampled": True, "interval_ms": 50}
    if mode == "loader":
        return {"sampled": False, "reason": "GPU utilisation is sampled with --in-situ, or with "
                                            "--step-ms on a CUDA machine"}
    if mode == "step" and pre.get("cuda"):
        return {"sampled": False, "reason": "NVML unavailable: utilisation not sampled"}
    return {"sampled": False,
            "reason": "no NVIDIA GPU: utilisation not sampled; the data-wait share is shown instead"}


def render_json(report: dict[str, Any]) -> str:
    def clean(o: Any) -> Any:
        if isinstance(o, float) and (math.isnan(o) or math.isinf(o)):
            return None
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [clean(v) for v in o]
        return o

    return visible_json(json.dumps(clean(report), indent=2, default=str)) + "\n"


# --------------------------------------------------------------------------
# Plot
# --------------------------------------------------------------------------


class PlotUnavailable(RuntimeError):
    pass


def plot(report: dict[str, Any], path: str) -> None:
    """Every run of each candidate; below it, each candidate's paired
    ratios to the current configuration with the interval and the
    threshold; with GPU samples, the utilisation curve per candidate."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable("--plot needs matplotlib (pip install 'loadlint[plot]')") from exc
    site = report["call_sites"][0]
    cands = [c for c in site["candidates"] if c["runs"]]
    decided = [c for c in cands[1:] if (c.get("decision") or {}).get("interval")]
    series = [(c, r.get("gpu_series")) for c in cands for r in c["runs"][:1] if r.get("gpu_series")]
    rows = 1 + bool(decided) + bool(series)
    fig, axes = plt.subplots(rows, 1, figsize=(7, 3.2 * rows), squeeze=False)
    ax = axes[0][0]
    for i, c in enumerate(cands):
        rates = [r["rate"] for r in c["runs"]]
        ax.scatter([i] * len(rates), rates, s=18, alpha=0.7)
        ax.hlines(c["median_rate"], i - 0.3, i + 0.3, colors="black")
    ax.set_xticks(range(len(cands)))
    ax.set_xticklabels([f"{c['name']}\nnw={c['config'].get('num_workers')}" for c in cands])
    ax.set_ylabel(site["rate_unit"])
    ax.set_title(f"{os.path.basename(site['file'])}:{site['line']} - {site['verdict']}")
    ax.set_ylim(bottom=0)
    row = 1
    if decided:
        px = axes[row][0]
        row += 1
        base = {r.get("round"): r["rate"] for r in cands[0]["runs"]}
        for i, c in enumerate(decided):
            d = c["decision"]
            ratios = [r["rate"] / base[r.get("round")] for r in c["runs"]
                      if base.get(r.get("round"))]
            px.scatter([i] * len(ratios), ratios, s=14, alpha=0.6)
            low, high = d["interval"]
            px.errorbar([i + 0.15], [d["speedup"]], yerr=[[d["speedup"] - low], [high - d["speedup"]]],
                        fmt="o", color="black", capsize=4)
            px.hlines(d["threshold"], i - 0.3, i + 0.3, colors="green", linestyles="dashed")
        px.axhline(1.0, color="grey", linewidth=0.8)
        px.set_xticks(range(len(decided)))
        px.set_xticklabels([f"{c['name']}: {c['decision']['verdict']}" for c in decided])
        px.set_ylabel("speedup vs current (pairs)")
    if series:
        gx = axes[row][0]
        for c, s in series:
            gx.plot([t for t, _ in s], [sum(u) / len(u) for _, u in s], label=c["name"])
        gx.set_xlabel("seconds")
        gx.set_ylabel("GPU utilisation %")
        gx.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
