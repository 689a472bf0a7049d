"""Turn raw shim results into the verify report: text, JSON and a plot.

JSON schema (``"schema": "loadlint.verify/1"``)::

    {
      "schema": "loadlint.verify/1",
      "loadlint": "0.1.0",
      "mode": "loader" | "step" | "in-situ" | "ddp",
      "command": ["python", "train.py", ...],      # what was executed
      "machine": {usable_cpus, affinity_cpus, cgroup_cpus, loadavg,
                  busy_share, steal_share, start_method, start_method_origin,
                  torch_threads, omp_num_threads, shm_free, memory_available,
                  python, torch, cuda, gpu_count},
      "ceiling": {"usable_cpus": 2, "max_speedup": 2.0, "text": "..."},
      "call_sites": [                               # one per measured call
        {
          "file": "train.py", "line": 42, "end_line": 45,  # 1-based, inclusive
          "class": "torch.utils.data.dataloader.DataLoader",
          "verdict": "confirmed" | "refuted" | "inconclusive" | "contended",
          "reason": "...",
          "winner": "suggested" | "try" | "tuned1" | ... | null,
          "speedup": 1.84 | null,               # winner (or suggested) vs current
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
             "decision": {"verdict", "speedup", "threshold", "reason"} | null,
             "runs": [{"rate", "epoch_s", "ttfb_s", "steady_bps", "cpu_s",
                       "worker_pss", "shm_growth", "data_wait_share",
                       "blocked_share", "gpu_util_mean", "gate"}]}
          ],
          "findings": ["correctness findings: candidates that change the data"],
          "sweep": [...] | absent               # --tune points
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
from typing import Any

from loadlint.verify import measure
from loadlint.signature import TUNABLE_DEFAULTS

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
    }


def analyse(raw: dict[str, Any], *, mode: str, command: list[str],
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
    cur_rates = [r["rate"] for r in (current or {}).get("runs", [])]
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
            "contended_runs": len(c.get("contended_runs", [])),
            "contended_evidence": [r["gate"].get("reason") for r in c.get("contended_runs", [])
                                   if r.get("gate")][:5],
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
            elif c.get("contended_runs") and len(rates) < 3:
                s["decision"] = {"verdict": "contended", "speedup": None, "threshold": None,
                                 "reason": "other work used the CPUs during its runs; "
                                           "not comparable"}
            else:
                d = measure.decide(cur_rates, rates)
                s["decision"] = {"verdict": d.verdict, "speedup": d.speedup,
                                 "threshold": d.threshold, "reason": d.reason}
        summaries.append(s)
    if current is not None and current.get("contended_runs") and len(cur_rates) < 3:
        for s in summaries[1:]:
            if s["decision"] and s["decision"]["verdict"] not in ("rejected", "failed"):
                s["decision"] = {"verdict": "contended", "speedup": None, "threshold": None,
                                 "reason": "other work used the CPUs during the current "
                                           "configuration's runs; not comparable"}
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
    if raw.get("sweep"):
        site_dict["sweep"] = raw["sweep"]
    report = {
        "schema": SCHEMA,
        "loadlint": version,
        "mode": mode,
        "command": command,
        "machine": pre,
        "ceiling": {"usable_cpus": usable, "max_speedup": ceil,
                    "text": f"at most {ceil:.1f}x on {usable} usable CPU{'s' * (usable != 1)} "
                            "for CPU-bound loading (loaders that wait on I/O can exceed it)"},
        "call_sites": [site_dict],
        "cuda": _cuda_section(raw, pre),
        "gpu": _gpu_section(mode, summaries, pre),
        "distributed": None,
        "notes": list(raw.get("notes", [])),
        "bench": {k: v for k, v in (raw.get("bench") or {}).items() if k != "calibration"},
    }
    return report


def _site_verdict(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    others = [s for s in summaries[1:] if s["decision"]]
    comparable = [s for s in others if s["decision"]["verdict"] not in ("rejected", "failed")]
    confirmed = [s for s in comparable if s["decision"]["verdict"] == "confirmed"]
    primary = next((s for s in comparable if s["name"] == "suggested"), comparable[0] if comparable else None)
    if confirmed:
        w = max(confirmed, key=lambda s: s["median_rate"] or 0)
        return {"verdict": "confirmed", "winner": w["name"], "speedup": w["decision"]["speedup"],
                "reason": f"{w['name']}: {w['decision']['reason']}", "winner_summary": w}
    if not comparable:
        why = "nothing to compare: " + ("every other candidate was rejected or failed"
                                        if others else "the suggestion is the current configuration")
        return {"verdict": "inconclusive", "winner": None, "speedup": None, "reason": why,
                "winner_summary": None}
    if any(s["decision"]["verdict"] == "contended" for s in comparable):
        discarded = sum(s["contended_runs"] for s in summaries)
        return {"verdict": "contended", "winner": None, "speedup": None,
                "reason": f"other work used the CPUs during the runs ({discarded} runs discarded "
                          "by the contention gate); rerun on a quiet machine",
                "winner_summary": None}
    assert primary is not None
    if all(s["decision"]["verdict"] == "refuted" for s in comparable):
        return {"verdict": "refuted", "winner": None, "speedup": primary["decision"]["speedup"],
                "reason": f"{primary['name']}: {primary['decision']['reason']}", "winner_summary": None}
    return {"verdict": "inconclusive", "winner": None, "speedup": primary["decision"]["speedup"],
            "reason": f"{primary['name']}: {primary['decision']['reason']}", "winner_summary": None}


def _cuda_section(raw: dict[str, Any], pre: dict[str, Any]) -> dict[str, Any]:
    cuda = raw.get("cuda")
    if not pre.get("cuda"):
        return {"measured": False, "reason": "no CUDA device: host-to-device copy not measured"}
    if not cuda:
        return {"measured": False, "reason": "host-to-device copy not measured"}
    return {"measured": True, "pageable_gbps": cuda["pageable"]["gbps"],
            "pinned_gbps": cuda["pinned"]["gbps"], "batch_bytes": cuda["pinned"]["bytes"]}


def _gpu_section(mode: str, summaries: list[dict[str, Any]], pre: dict[str, Any]) -> dict[str, Any]:
    if mode != "in-situ":
        return {"sampled": False, "reason": "GPU utilisation is sampled with --in-situ only"}
    if any(s.get("gpu_util_mean") is not None for s in summaries):
        return {"sampled": True, "interval_ms": 50}
    return {"sampled": False,
            "reason": "no NVIDIA GPU: utilisation not sampled; the data-wait share is shown instead"}


# --------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------


def format_config(config: dict[str, Any], base: dict[str, Any] | None = None) -> str:
    """Keywords that differ from ``base`` (or from DataLoader's defaults)."""
    ref = base or TUNABLE_DEFAULTS
    parts = []
    for key in TUNABLE_DEFAULTS:
        value = config.get(key, TUNABLE_DEFAULTS[key])
        if key == "num_workers" or value != ref.get(key, TUNABLE_DEFAULTS[key]):
            if key == "prefetch_factor" and value is None and config.get("num_workers"):
                continue
            parts.append(f"{key}={value!r}")
    return ", ".join(parts)


def _bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit in ("B", "KB") else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _s(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x * 1000:.0f} ms" if x < 0.995 else f"{x:.2f} s"


def _rel(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


def render_text(report: dict[str, Any]) -> str:
    if report["mode"] == "ddp":
        return render_ddp_text(report)
    out: list[str] = []
    m = report["machine"]
    for site in report["call_sites"]:
        span = f"{site['line']}" if site["end_line"] in (None, site["line"]) else f"{site['line']}-{site['end_line']}"
        cls = (site.get("class") or "DataLoader").rsplit(".", 1)[-1]
        out.append(f"loadlint verify: {_rel(site['file'])}:{span}  {cls}({site.get('dataset')}, "
                   f"batch_size={site.get('batch_size')})  [{report['mode']} mode]")
        load = m.get("loadavg")
        out.append(
            f"machine: {m.get('usable_cpus')} usable CPUs (affinity {m.get('affinity_cpus')}, "
            f"cgroup quota {m.get('cgroup_cpus') or 'none'}), load "
            f"{load[0]:.2f}" if load else "machine: ?")
        out[-1] += (f", start method {m.get('start_method')} ({m.get('start_method_origin')}), "
                    f"torch threads {m.get('torch_threads')}, OMP_NUM_THREADS "
                    f"{m.get('omp_num_threads') or 'unset'}, /dev/shm {_bytes(m.get('shm_free'))} free, "
                    f"RAM {_bytes(m.get('memory_available'))} free")
        out.append(f"ceiling: {report['ceiling']['text']}")
        unit = site["rate_unit"]
        if site.get("len") and unit == "epochs/s":
            out.append(f"epoch: {site['len']} batches as written; projected epoch = start-up + "
                       "len / steady rate")
        out.append("")
        header = f"  {'candidate':<11} {'n':>2} {'median':>10} {'spread':>7} {'vs current':>19}  "
        if report["mode"] == "in-situ":
            header += f"{'steps/s':>8} {'blocked':>8} {'GPU util':>9}  config"
        else:
            header += f"{'epoch':>9} {'TTFB':>7} {'restart':>8} {'batch/s':>8} {'CPU':>7} {'PSS wrk':>8} {'shm':>7}  config"
        out.append(header)
        base = site["candidates"][0]["config"] if site["candidates"] else None
        for c in site["candidates"]:
            d = c["decision"]
            vs = "-" if not d else (f"{d['speedup']:.2f}x {d['verdict'][:7]}" if d.get("speedup")
                                    else d["verdict"])
            med = "-" if c["median_rate"] is None else f"{c['median_rate']:.4g}"
            spread = "-" if c["spread"] is None else f"{c['spread']:.1%}"
            row = f"  {c['name']:<11} {c['n']:>2} {med:>10} {spread:>7} {vs:>19}  "
            if report["mode"] == "in-situ":
                blocked = "-" if c["data_wait_share"] is None else f"{c['data_wait_share']:.0%}"
                gpu = "-" if c["gpu_util_mean"] is None else f"{c['gpu_util_mean']:.0f}±{c['gpu_util_stdev']:.0f}%"
                row += f"{med:>8} {blocked:>8} {gpu:>9}  "
            else:
                bps = "-" if c["median_steady_bps"] is None else f"{c['median_steady_bps']:.1f}"
                cpu = "-" if c["median_cpu_s"] is None else f"{c['median_cpu_s']:.1f}s"
                row += (f"{_s(c['median_epoch_s']):>9} {_s(c['median_ttfb_s']):>7} "
                        f"{_s(c['median_restart_s']):>8} {bps:>8} {cpu:>7} "
                        f"{_bytes(c['median_worker_pss']):>8} {_bytes(c['median_shm_growth']):>7}  ")
            row += format_config(c["config"], None if c is site["candidates"][0] else base)
            out.append(row)
        out.append(f"  (median and runs in {unit}; higher is better)")
        for c in site["candidates"]:
            if c["runs"]:
                runs = " ".join(f"{r['rate']:.4g}" for r in c["runs"])
                extra = f"  (+{c['contended_runs']} contended, discarded)" if c["contended_runs"] else ""
                out.append(f"  runs {c['name']}: {runs}{extra}")
        if report["mode"] == "step" and site["candidates"]:
            shares = ", ".join(f"{c['name']} {c['data_wait_share']:.0%}" for c in site["candidates"]
                               if c["data_wait_share"] is not None)
            out.append(f"  share of each step spent waiting for data: {shares}")
        out.append("")
        for c in site["candidates"][1:]:
            eq = c["equivalence"] or {}
            if eq:
                mark = "same data" if eq.get("equivalent") else "REJECTED: changes the data"
                out.append(f"equivalence {c['name']}: {mark} ({eq.get('how')})")
            if c["error"]:
                out.append(f"failed {c['name']}: {c['error']['type']}: {c['error']['message']}")
        for f in site["findings"]:
            out.append(f"correctness finding: {f}")
        if site.get("sweep"):
            pts = ", ".join(
                f"{p['name']} " + ("contended" if p["rate"] is None and p["equivalent"]
                                   else "rejected" if not p["equivalent"] else f"{p['rate']:.4g}")
                + (" (dropped)" if p["dropped"] and p["rate"] is not None else "")
                for p in site["sweep"])
            out.append(f"tune sweep ({unit}, one run each): {pts}")
        for c in site["candidates"]:
            if c.get("h2d_gbps"):
                out.append(f"host-to-device in the loop, {c['name']}: {c['h2d_gbps']:.1f} GB/s "
                           f"(pin_memory={c['config'].get('pin_memory')}, non_blocking=True)")
        cuda = report["cuda"]
        out.append("cuda: " + (cuda["reason"] if not cuda["measured"] else
                               f"host-to-device {cuda['pinned_gbps']:.1f} GB/s pinned vs "
                               f"{cuda['pageable_gbps']:.1f} GB/s pageable (non_blocking=True)"))
        if report["mode"] == "in-situ":
            g = report["gpu"]
            out.append("gpu: " + ("utilisation sampled every 50 ms through NVML" if g["sampled"]
                                  else g["reason"]))
        for n in report["notes"]:
            out.append(f"note: {n}")
        verdict = site["verdict"].upper()
        if site["verdict"] == "contended":
            verdict = "CONTENDED - not comparable"
        sp = f" ({site['speedup']:.2f}x)" if site.get("speedup") else ""
        out.append(f"verdict: {verdict}{sp}: {site['reason']}")
        if site["verdict"] == "confirmed":
            out.append(f"best: {format_config(site['best']) or 'DataLoader defaults'}"
                       + (f"; remove {', '.join(site['removed'])}" if site["removed"] else ""))
            out.append("apply with: loadlint fix --from-verify REPORT.json "
                       "(write the report with -o REPORT.json)")
    return "\n".join(out).rstrip() + "\n"


def render_ddp_text(report: dict[str, Any]) -> str:
    d = report["distributed"]
    out = []
    where = ""
    if d.get("call"):
        c = d["call"]
        where = f"{_rel(c['file'])}:{c['line']}" + (f"-{c['end_line']}" if c['end_line'] != c['line'] else "")
    how = ("simulated DistributedSampler per rank (" + d["simulated_reason"] + ")"
           if d.get("simulated") else f"{d['nproc']} ranks under torch.distributed.run, "
                                      f"{d.get('backend') or 'gloo'} on loopback")
    out.append(f"loadlint verify --nproc {d['nproc']}: {where}  [{how}]")
    if d.get("sampler"):
        out.append(f"sampler: {d['sampler']}; dataset of {d.get('dataset_len')} samples; "
                   f"{d.get('epochs_observed')} epoch(s) observed per rank (truncated to "
                   f"{d.get('batches_per_epoch')} batches)")
    for check in d["checks"]:
        out.append(f"  {check['status']:<5} {check['name']}: {check['evidence']}")
    for n in report.get("notes", []):
        out.append(f"note: {n}")
    out.append(f"verdict: {d['verdict'].upper()}")
    return "\n".join(out) + "\n"


def render_json(report: dict[str, Any]) -> str:
    def clean(o: Any) -> Any:
        if isinstance(o, float) and (math.isnan(o) or math.isinf(o)):
            return None
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [clean(v) for v in o]
        return o

    return json.dumps(clean(report), indent=2, default=str) + "\n"


# --------------------------------------------------------------------------
# Plot
# --------------------------------------------------------------------------


class PlotUnavailable(RuntimeError):
    pass


def plot(report: dict[str, Any], path: str) -> None:
    """Throughput per candidate with every run's point; with GPU samples,
    the utilisation curve per candidate below it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable("--plot needs matplotlib (pip install 'loadlint[plot]')") from exc
    site = report["call_sites"][0]
    cands = [c for c in site["candidates"] if c["runs"]]
    series = [(c, r.get("gpu_series")) for c in cands for r in c["runs"][:1] if r.get("gpu_series")]
    rows = 2 if series else 1
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
    if series:
        gx = axes[1][0]
        for c, s in series:
            gx.plot([t for t, _ in s], [sum(u) / len(u) for _, u in s], label=c["name"])
        gx.set_xlabel("seconds")
        gx.set_ylabel("GPU utilisation %")
        gx.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
