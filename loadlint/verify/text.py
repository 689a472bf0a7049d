"""The verify report as text: the answer first (best configuration, its
speedup with the interval, the projected epoch before and after), then the
machine, the table of candidates and the evidence."""

from __future__ import annotations

import os
import textwrap
from typing import Any

from loadlint.facts.signature import TUNABLE_DEFAULTS
from loadlint.sources.source import visible


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


def _interval(d: dict[str, Any] | None) -> str:
    if not d or not d.get("interval"):
        return ""
    low, high = d["interval"]
    # The nominal level; the exact coverage of the order statistics is in
    # the JSON report.
    level = f"{d['level']:.0%}"
    return f"{level} interval {low:.2f}x-{high:.2f}x, {d['pairs']} pairs"


def _compared(site: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in site.get("candidates", []) if c["name"] == site.get("compared")), None)


def answer(site: dict[str, Any], output: str | None = None) -> list[str]:
    """The lines that lead the report: what to do and how sure it is.
    ``output``: where the JSON report was written (-o), if it was."""
    d = site.get("decision")
    verdict = site["verdict"]
    epoch = site.get("epoch_s") or {}
    out = []
    if verdict == "confirmed":
        out.append(f"answer: {format_config(site['best']) or 'DataLoader defaults'} is "
                   f"{site['speedup']:.2f}x faster than the call as written "
                   f"(CONFIRMED; {_interval(d)})")
        if epoch.get("current") and epoch.get("best"):
            out.append(f"  projected epoch: {_s(epoch['current'])} as written -> "
                       f"{_s(epoch['best'])} with {site['winner']}")
        if d and d.get("cpu_ratio"):
            out.append(f"  CPU time per batch (cross-check, unaffected by other work): "
                       f"{d['cpu_ratio']:.2f}x the current configuration's")
        if site["removed"]:
            out.append(f"  remove {', '.join(site['removed'])} from the call")
        out.append(f"  apply with: loadlint fix --from-verify {output}" if output else
                   "  apply with: loadlint fix --from-verify REPORT.json "
                   "(write the report with -o REPORT.json)")
        return out
    other = _compared(site)
    sp = site.get("speedup")
    pairs_n = (d or {}).get("pairs") or 0
    won = (d or {}).get("favoured")
    above_one = bool(d and d.get("interval") and d["interval"][0] > 1.0)
    if d and other is not None and sp and sp > 1.0 and pairs_n and (won == pairs_n or above_one):
        # Every pair, or the interval, favours the candidate: say so, never "keep the call".
        why = (f"{_interval(d)}, not clear of the {d['threshold']:.2f}x threshold"
               if d.get("interval") else
               f"{pairs_n} pair{'s' * (pairs_n != 1)}: too few for an interval")
        busy = "; the machine was busy with other work" if verdict == "contended" else ""
        where = (f"in all {pairs_n} pair{'s' * (pairs_n != 1)}" if won == pairs_n
                 else f"in {won} of {pairs_n} pairs")
        out.append(f"answer: {format_config(other['config'], None)} measured "
                   f"{sp:.2f}x faster {where}, UNCONFIRMED "
                   f"({why}{busy}); confirm with a larger --budget or on a quieter machine")
    elif verdict == "contended":
        seen = f" (best other measured {sp:.2f}x over {pairs_n} pairs)" if sp else ""
        out.append(f"answer: none: the machine was too busy with other work to compare{seen}; "
                   "rerun on a quieter machine or with a larger --budget")
    else:
        speed = f" (best other: {sp:.2f}x; {_interval(d) or f'{pairs_n} pairs'})" if sp else ""
        head = ("every alternative measured slower" if verdict == "refuted"
                else "no faster configuration found that the measurements confirm")
        out.append(f"answer: keep the call as written: {head}{speed}")
    if epoch.get("current"):
        out.append(f"  projected epoch as written: {_s(epoch['current'])}")
    return out


def render_text(report: dict[str, Any], output: str | None = None, width: int | None = None,
                wide: bool = False) -> str:
    """The human report of a loader, step or in-situ run. ``output``: the
    -o file; ``width``: the terminal's columns (None: no limit), to which
    long lines wrap; ``wide``: every column of the table (else the columns
    a decision reads, the configuration on a line of its own)."""
    if report["mode"] == "ddp":
        return render_ddp_text(report)
    out: list[str] = []
    m = report["machine"]
    for site in report["call_sites"]:
        span = f"{site['line']}" if site["end_line"] in (None, site["line"]) else f"{site['line']}-{site['end_line']}"
        cls = (site.get("class") or "DataLoader").rsplit(".", 1)[-1]
        out.append(f"loadlint verify: {_rel(site['file'])}:{span}  {cls}({site.get('dataset')}, "
                   f"batch_size={site.get('batch_size')})  [{report['mode']} mode]")
        out.extend(answer(site, output))
        out.append("")
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
        if report["ceiling"].get("excess"):
            out.append(f"  {report['ceiling']['excess']}")
        if site.get("search"):
            sr = site["search"]
            how = "search" if sr.get("mode") == "search" else "sweep (--tune)"
            refs = f", {sr['reference_runs']} runs of the call as written" if sr.get("reference_runs") else ""
            stop = f"; stopped: {sr['stopped']}" if sr.get("stopped") else ""
            out.append(f"{how}: {sr.get('reason')}; {sr.get('points')} points measured{refs}{stop}")
        unit = site["rate_unit"]
        if site.get("len") and unit == "epochs/s":
            out.append(f"epoch: {site['len']} batches as written; projected epoch = start-up + "
                       "len / steady rate")
        out.append("")
        out.extend(_table(report, site, wide))
        out.append(f"  (median and runs in {unit}; higher is better; vs current: median of the "
                   "ratios to the current run of the same round, interleaved A B / B A)")
        for c in site["candidates"]:
            if c["runs"]:
                runs = " ".join(f"{r['rate']:.4g}" for r in c["runs"])
                extra = (f"  ({c['contended_runs']} under load, other work "
                         f"{c['busy_share']:.0%} of the CPUs)"
                         if c["contended_runs"] and c.get("busy_share") is not None else "")
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
            if (c["decision"] or {}).get("verdict") == "dropped":
                out.append(f"dropped {c['name']}: {c['decision']['reason']}")
        for f in site["findings"]:
            out.append(f"correctness finding: {f}")
        if site.get("sweep"):
            pts = ", ".join(
                f"{p['name']} " + ("failed" if p["rate"] is None and p["equivalent"]
                                   else "rejected" if not p["equivalent"] else f"{p['rate']:.4g}"
                                   + (f" ({p['vs_current']:.2f}x)" if p.get("vs_current") else ""))
                + (" (dropped)" if p["dropped"] and p["rate"] is not None else "")
                for p in site["sweep"])
            out.append(f"search points ({unit}, one run each; in brackets its ratio to the "
                       f"current run of its round): {pts}")
        for c in site["candidates"]:
            if c.get("h2d_gbps"):
                out.append(f"host-to-device in the loop, {c['name']}: {c['h2d_gbps']:.1f} GB/s "
                           f"(pin_memory={c['config'].get('pin_memory')}, non_blocking=True)")
        cuda = report["cuda"]
        out.append("cuda: " + (cuda["reason"] if not cuda["measured"] else
                               f"host-to-device {cuda['pinned_gbps']:.1f} GB/s pinned vs "
                               f"{cuda['pageable_gbps']:.1f} GB/s pageable (non_blocking=True)"))
        if report["mode"] != "loader" or report["gpu"]["sampled"]:
            g = report["gpu"]
            util = ", ".join(f"{c['name']} {c['gpu_util_mean']:.0f}±{c['gpu_util_stdev']:.0f}%"
                             for c in site["candidates"] if c.get("gpu_util_mean") is not None)
            out.append("gpu: " + (f"utilisation sampled every 50 ms through NVML: {util}"
                                  if g["sampled"] else g["reason"]))
        for n in report["notes"]:
            out.append(f"note: {n}")
        verdict = site["verdict"].upper()
        if site["verdict"] == "contended":
            verdict = "CONTENDED - not comparable"
        sp = f" ({site['speedup']:.2f}x)" if site.get("speedup") else ""
        out.append(f"verdict: {verdict}{sp}: {site['reason']}")
    # The script's names, paths and error messages are escaped as every
    # report line is, before wrapping counts their width.
    return "\n".join(_wrap([visible(line) for line in out], width)).rstrip() + "\n"


def _wrap(lines: list[str], width: int | None) -> list[str]:
    """Lines longer than ``width`` folded, continuation indented."""
    if not width:
        return lines
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        lead = " " * (len(line) - len(line.lstrip()))
        out.extend(textwrap.wrap(line, width=max(20, width), initial_indent="",
                                 subsequent_indent=lead + "    ", break_on_hyphens=False)
                   or [line])
    return out


def _table(report: dict[str, Any], site: dict[str, Any], wide: bool) -> list[str]:
    """The candidates' table: with ``wide`` every column and the
    configuration on the row (about 170 columns); else the columns a
    decision reads (under 80) and the configuration on the next line."""
    out = []
    insitu = report["mode"] == "in-situ"
    header = f"  {'candidate':<11} {'n':>2} {'median':>10} {'spread':>7} {'vs current':>19} {'interval':>13}  "
    if not wide:
        header = f"  {'candidate':<11} {'n':>2} {'median':>9} {'vs current':>19} {'interval':>13}  "
        header += f"{'blocked':>8}" if insitu else f"{'epoch':>9} {'batch/s':>8}"
    elif insitu:
        header += f"{'steps/s':>8} {'blocked':>8} {'GPU util':>9}  config"
    else:
        header += f"{'epoch':>9} {'TTFB':>7} {'restart':>8} {'batch/s':>8} {'CPU':>7} {'PSS wrk':>8} {'shm':>7}  config"
    out.append(header.rstrip())
    base = site["candidates"][0]["config"] if site["candidates"] else None
    for c in site["candidates"]:
        d = c["decision"]
        vs = "-" if not d else (f"{d['speedup']:.2f}x {d['verdict'][:7]}" if d.get("speedup")
                                else d["verdict"])
        med = "-" if c["median_rate"] is None else f"{c['median_rate']:.4g}"
        spread = "-" if c["spread"] is None else f"{c['spread']:.1%}"
        iv = (d or {}).get("interval")
        ivs = "-" if not iv else f"{iv[0]:.2f}-{iv[1]:.2f}x"
        bps = "-" if c["median_steady_bps"] is None else f"{c['median_steady_bps']:.1f}"
        blocked = "-" if c["data_wait_share"] is None else f"{c['data_wait_share']:.0%}"
        config = format_config(c["config"], None if c is site["candidates"][0] else base)
        if not wide:
            row = f"  {c['name']:<11} {c['n']:>2} {med:>9} {vs:>19} {ivs:>13}  "
            row += f"{blocked:>8}" if insitu else f"{_s(c['median_epoch_s']):>9} {bps:>8}"
            out.append(row.rstrip())
            out.append(f"    {config}")
            continue
        row = f"  {c['name']:<11} {c['n']:>2} {med:>10} {spread:>7} {vs:>19} {ivs:>13}  "
        if insitu:
            gpu = "-" if c["gpu_util_mean"] is None else f"{c['gpu_util_mean']:.0f}±{c['gpu_util_stdev']:.0f}%"
            row += f"{med:>8} {blocked:>8} {gpu:>9}  "
        else:
            cpu = "-" if c["median_cpu_s"] is None else f"{c['median_cpu_s']:.1f}s"
            row += (f"{_s(c['median_epoch_s']):>9} {_s(c['median_ttfb_s']):>7} "
                    f"{_s(c['median_restart_s']):>8} {bps:>8} {cpu:>7} "
                    f"{_bytes(c['median_worker_pss']):>8} {_bytes(c['median_shm_growth']):>7}  ")
        out.append(row + config)
    return out


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
    return "".join(visible(line) + "\n" for line in out)


