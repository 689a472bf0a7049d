"""From the monitored process's measurements to the report.

The JSON follows ``loadlint trace``'s contract for its top level (the
loader with the most steps): ``summary``, ``steps`` (each with its
``start_ms`` and the ``config`` it ran under: 0 as written, k the tuner's
k-th candidate, -1 a swap), ``findings`` with ``location`` ``{path, row,
column}``; ``loaders`` gives the same per loader, with its call and
configuration; ``tuning`` the tuner's answer; ``call_sites`` what ``loadlint
fix --from-verify`` reads.  ``"schema": "loadlint.monitor/1"`` comes first,
so that ``loadlint trace`` recognises a monitor report from its first bytes.

Findings come from ``trace``'s rules (:func:`loadlint.trace.findings.diagnose`)
applied to the steps as written: a run under ``--tune`` is diagnosed on
the windows and passes that ran the configuration as written.
"""

from __future__ import annotations

import ast
import os
import statistics
import time
from pathlib import Path
from typing import Any

from loadlint.facts.signature import TUNABLE_DEFAULTS
from loadlint.monitor.instrument import config_text
from loadlint.trace.findings import TraceFinding, diagnose
from loadlint.trace.metrics import Rank, Step
from loadlint.trace.report import finding_lines, summary

SCHEMA = "loadlint.monitor/1"
MAPPING = "high confidence (the DataLoader(...) call that built the loader, recorded in the run)"


def _relative(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _column(path: str, row: int) -> int:
    """The column of the DataLoader call starting on ``row`` (1-based)."""
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return 1
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.lineno == row]
    if not calls:
        return 1

    def named(call: ast.Call) -> bool:
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        return name.endswith("Loader")

    best = min(calls, key=lambda c: (not named(c), c.col_offset))
    return best.col_offset + 1


def static_findings(path: str, row: int, end_row: int) -> list[str]:
    """The call's static findings, as ``trace --source`` lists them."""
    if not os.path.isfile(path) or "site-packages" in Path(path).parts:
        return []
    from loadlint.api import check_paths

    try:
        run = check_paths([Path(path)])
    except Exception:  # the report goes on without them
        return []
    return [f"{_relative(f.path)}:{f.location.row}:{f.location.column}: {f.code} {f.message}" + (" [*]" if f.fix is not None else "")
            for f in run.findings if row <= f.location.row <= end_row]


def _gpu_busy(samples: list[list[Any]], start: float, dur: float) -> float | None:
    """The step's GPU busy time from the utilisation samples inside it (or
    the last one before it)."""
    if not samples:
        return None
    inside = [s[1] for s in samples if start <= s[0] <= start + dur]
    if not inside:
        before = [s[1] for s in samples if s[0] < start]
        inside = before[-1:] or [samples[0][1]]
    return float(sum(inside)) / len(inside) / 100.0 * dur * 1e3


def loader_rank(raw: dict[str, Any], loader: dict[str, Any], device: str, gpu: list[list[Any]],
                only_written: bool) -> Rank:
    steps: list[Step] = []
    passes = set(loader["pass_starts"])
    starts: list[int] = []
    for i, (start, dur, wait, config) in enumerate(loader["steps"]):
        if only_written and config != 0:
            continue
        if i in passes:
            starts.append(len(steps))
        steps.append(Step(len(steps), start * 1e6, dur * 1e3, wait * 1e3, _gpu_busy(gpu, start, dur)))
    rank = Rank(_relative(loader["file"]), None, device, steps, "loadlint monitor", list(loader["iterators"]))
    rank.epoch_starts = starts
    return rank


def _copies(rank: Rank, copies: list[list[Any]]) -> None:
    for _, nbytes, pinned, took, blocking in copies:
        if pinned:
            rank.pinned_bytes += nbytes
            rank.pinned_us += took * 1e6 if blocking else 0.0
        else:
            rank.pageable_bytes += nbytes
            rank.pageable_us += took * 1e6
        if blocking:
            rank.blocking.append(("Tensor.to (blocking)", took * 1e6))


def _rate(loader: dict[str, Any], config: int | None = None) -> float | None:
    steps = [s for s in loader["steps"] if config is None or s[3] == config]
    total = sum(s[1] for s in steps)
    return len(steps) / total if total else None


def build(raw: dict[str, Any], command: list[str], *, static: bool = True) -> dict[str, Any]:
    """The report (the JSON written by ``-o``)."""
    sampling = raw.get("sampling") or {}
    gpu = sampling.get("gpu") or {}
    samples = gpu.get("samples") or []
    device = gpu.get("name") or ("cuda" if raw.get("cuda") else "cpu")
    tuning = raw.get("tuning")
    loaders = [ld for ld in raw.get("loaders", []) if ld["steps"]]
    primary = max(loaders, key=lambda ld: len(ld["steps"])) if loaders else None
    entries: list[dict[str, Any]] = []
    all_findings: list[TraceFinding] = []
    for loader in loaders:
        tuned = tuning is not None and tuning.get("loader") == loader["index"]
        rank = loader_rank(raw, loader, device, samples, tuned)
        if tuned:
            rank.epoch_starts = []  # the tuner's private loaders keep their workers
        whole = loader_rank(raw, loader, device, samples, False) if tuned else rank
        if loader is primary:
            _copies(rank, raw.get("copies") or [])
            if whole is not rank:
                _copies(whole, raw.get("copies") or [])
        findings = diagnose(rank) if len(rank.steps) >= 2 else []
        column = _column(loader["file"], loader["line"])
        location = {"path": _relative(loader["file"]), "row": loader["line"], "column": column}
        lines = static_findings(loader["file"], loader["line"], loader["end_line"]) if static and findings else []
        pinned = loader["pinned"]
        for f in findings:
            f.message = f.message.replace("over the trace", "over the run")
            f.location = location
            f.mapping = MAPPING
            f.static = lines
            f.evidence["location_confidence"] = "high"
            if f.code == "LL202" and pinned["pageable"]:
                f.evidence["batches_looked_at"] = pinned["pinned"] + pinned["pageable"]
                f.evidence["batches_pageable"] = pinned["pageable"]
        all_findings += findings
        entries.append({
            "call": {**location, "end_row": loader["end_line"], "class": loader["class"]},
            "config": loader["config"], "len": loader["len"], "batch_size": loader["batch_size"],
            "dataset": loader["dataset"], "iterators": loader["iterators"], "passes": len(loader["pass_starts"]),
            "batches": loader["batches"], "batches_per_s": _r(_rate(loader)),
            "pinned": pinned if raw.get("cuda") else None,
            "summary": summary([whole]), "steps": _steps(loader, samples),
            "findings": [f.as_json() for f in findings], "static": lines,
        })
    top = next((e for e, ld in zip(entries, loaders) if ld is primary), None)
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "summary": top["summary"] if top else summary([]),
        "steps": top["steps"] if top else [],
        "findings": [f.as_json() for f in all_findings],
        "command": command,
        "exit_code": raw.get("exit_code"),
        "wall_s": raw.get("wall_s"),
        "loaders": entries,
        "iterators": top["iterators"] if top else [],
        "memory": _memory(sampling.get("memory") or []),
        "gpu": {k: v for k, v in gpu.items() if k != "samples"} | {"samples": samples},
        "tuning": _tuning(tuning, raw) if tuning else None,
        "notes": raw.get("notes", []),
        "date": time.strftime("%Y-%m-%d", time.gmtime(raw.get("started") or time.time())),
        "machine": raw.get("machine", {}),
    }
    if tuning:
        report["call_sites"] = call_sites(report["tuning"], raw)
    report["_findings"] = all_findings  # for the text; removed before JSON
    return report


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _steps(loader: dict[str, Any], samples: list[list[Any]]) -> list[dict[str, Any]]:
    out = []
    for i, (start, dur, wait, config) in enumerate(loader["steps"]):
        busy = _gpu_busy(samples, start, dur)
        out.append({"index": i, "dur_ms": round(dur * 1e3, 3), "data_wait_ms": round(wait * 1e3, 3),
                    "gpu_busy_ms": None if busy is None else round(busy, 3), "start_ms": round(start * 1e3, 3),
                    "config": config})
    return out


def _memory(samples: list[dict[str, Any]]) -> dict[str, Any]:
    if not samples:
        return {"samples": 0, "peak_workers": 0, "peak_worker_uss": None, "peak_worker_rss": None, "shm_growth": None}
    shm = [s["shm_used"] for s in samples if s.get("shm_used") is not None]
    return {"samples": len(samples), "peak_workers": max(s["workers"] for s in samples),
            "peak_worker_uss": max(s["worker_uss"] for s in samples), "peak_worker_rss": max(s["worker_rss"] for s in samples),
            "shm_growth": max(shm) - shm[0] if shm else None}


def _tuning(tuning: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
    wall = raw.get("wall_s") or 0.0
    tuned_at = tuning.get("tuned_at_s")
    loader = next((ld for ld in raw["loaders"] if ld["index"] == tuning["loader"]), None)
    out: dict[str, Any] = {key: tuning[key] for key in ("before", "after", "speedup", "verdict", "reason", "compared", "interval",
                                        "busy", "worker_cpus", "state", "points", "windows", "failed") if key in tuning}
    out["loader"] = {"path": _relative(loader["file"]), "row": loader["line"], "end_row": loader["end_line"]} if loader else None
    out["tuned_at_s"] = tuned_at
    out["share_of_run_tuning"] = round(tuned_at / wall, 3) if tuned_at is not None and wall else None
    return out


def best_keywords(config: dict[str, Any]) -> dict[str, Any]:
    """The tunable keywords that differ from DataLoader's defaults."""
    best = {}
    for key, value in config.items():
        if key == "prefetch_factor" and (not config.get("num_workers") or value == 2):
            continue
        if key in TUNABLE_DEFAULTS and value != TUNABLE_DEFAULTS[key]:
            best[key] = value
    return best


def call_sites(tuning: dict[str, Any], raw: dict[str, Any]) -> list[dict[str, Any]]:
    """``fix --from-verify``'s input: the tuned call, its verdict and the
    configuration it ended with."""
    where = tuning.get("loader")
    if where is None:
        return []
    loader = next(ld for ld in raw["loaders"] if ld["index"] == raw["tuning"]["loader"])
    confirmed = tuning["verdict"] == "confirmed"
    best = best_keywords(tuning["after"]["config"] if confirmed else tuning["before"]["config"])
    return [{
        "file": loader["file"], "line": loader["line"], "end_line": loader["end_line"], "class": loader["class"],
        "verdict": tuning["verdict"], "reason": tuning["reason"], "speedup": tuning["speedup"],
        "best": best, "changes": best_keywords(tuning["after"]["config"]) if confirmed else {},
        "removed": [k for k in ("num_workers", "persistent_workers", "prefetch_factor", "pin_memory") if k not in best],
        "rate_unit": "batches/s",
    }]


def as_json(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if not k.startswith("_")}


# -- text ------------------------------------------------------------------


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def as_text(report: dict[str, Any]) -> str:
    lines = [f"loadlint monitor: {' '.join(report['command'])} (exit {report['exit_code']}, {report['wall_s']:.1f} s)"]
    entries = report["loaders"]
    if not entries:
        lines.append("  no DataLoader was iterated")
    else:
        lines.append(f"  {'loader':<24} {'configuration':<44} {'batches':>8} {'passes':>6} {'batch/s':>8} "
                     f"{'wait ms':>8} {'step ms':>8} {'wait':>5}  pinned")
        for e in entries:
            call, s = e["call"], e["summary"]
            steps = e["steps"]
            wait = statistics.median(x["data_wait_ms"] for x in steps) if steps else 0.0
            pinned = e["pinned"]
            pin = "-" if not pinned else f"{pinned['pinned']}/{pinned['pinned'] + pinned['pageable']}"
            rate = e["batches_per_s"]
            lines.append(f"  {call['path'] + ':' + str(call['row']):<24} {config_text(e['config']):<44} {e['batches']:>8} {e['passes']:>6} "
                         f"{rate if rate is not None else 0:>8.1f} {wait:>8.2f} {s['median_step_ms'] or 0:>8.2f} {s['data_wait_share']:>5.0%}  {pin}")
    mem = report["memory"]
    if mem["peak_workers"]:
        lines.append(f"  workers: up to {mem['peak_workers']} processes, {_size(mem['peak_worker_uss'])} unique memory "
                     f"({_size(mem['peak_worker_rss'])} resident); /dev/shm grew {_size(mem['shm_growth'])}")
    gpu = report["gpu"]
    if gpu.get("sampled"):
        util = [s[1] for s in gpu["samples"]]
        rx = [s[2] for s in gpu["samples"] if s[2] is not None]
        text = f"  GPU ({gpu['name']}, {gpu['count']}): utilisation mean {sum(util) / len(util):.0f}%" if util else "  GPU: no samples"
        if rx:
            text += f", PCIe receive mean {sum(rx) / len(rx):.0f} MB/s"
        lines.append(text)
    else:
        lines.append(f"  GPU: not sampled ({gpu.get('reason') or 'no NVIDIA GPU'})")
    tuning = report.get("tuning")
    if tuning:
        lines += [""] + tuning_lines(tuning)
    return "\n".join(lines + findings_tail(report)) + "\n"


def findings_tail(report: dict[str, Any]) -> list[str]:
    """A report's notes, then its findings, each call's first in full, and the count."""
    lines = [f"  note: {note}" for note in report["notes"]] + [""]
    found: list[TraceFinding] = report.get("_findings", [])
    seen: set[str] = set()
    for finding in found:
        key = repr(finding.location)
        rank = Rank(finding.location["path"] if finding.location else "", None, "", [], "", [])
        lines += finding_lines(rank, finding, first_at_call=key not in seen)
        seen.add(key)
    lines.append(f"Found {len(found)} finding{'s' if len(found) != 1 else ''} in the run." if found
                 else "No loader bottleneck found in the run.")
    return lines


def _rate_text(value: float | None) -> str:
    return f"{value:.1f} batches/s" if value else "-"


def tuning_lines(tuning: dict[str, Any]) -> list[str]:
    where = tuning["loader"]
    at = f"{where['path']}:{where['row']}" if where else "?"
    before, after = tuning["before"], tuning["after"]
    speed = f"{tuning['speedup']:.2f}x" if tuning.get("speedup") else "-"
    interval = tuning.get("interval")
    span = f"; 99% interval {interval[0]:.2f}x-{interval[1]:.2f}x" if interval else ""
    lines = [f"tuning {at}: {tuning['verdict'].upper()} ({speed}{span})"]
    lines.append(f"  before: {config_text(before['config'])}: {_rate_text(before['batches_per_s'])}")
    kept = "kept" if tuning["verdict"] == "confirmed" else "as written"
    lines.append(f"  after ({kept}): {config_text(after['config'])}: {_rate_text(after['batches_per_s'])}")
    if tuning.get("tuned_at_s") is not None:
        share = tuning.get("share_of_run_tuning")
        lines.append(f"  decided after {tuning['tuned_at_s']:.1f} s" + (f" ({share:.0%} of the run)" if share is not None else ""))
    lines.append(f"  {tuning['reason']}")
    points = ", ".join(f"{config_text(p['config'])} {p['ratio']:.2f}x" for p in tuning.get("points", []))
    if points:
        lines.append(f"  points (median ratio to the configuration as written): {points}")
    if tuning["verdict"] == "confirmed":
        lines.append("  apply with: loadlint fix --from-verify REPORT.json (write the report with -o REPORT.json)")
    return lines
