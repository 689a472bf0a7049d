"""The diagnosis as JSON (the contract), as text (a table per rank, then
the findings, ruff-style), and two runs side by side (``--compare``)."""

from __future__ import annotations

import statistics
from typing import Any

from loadlint.sources.source import visible
from loadlint.trace.analyse import Diagnosis
from loadlint.trace.findings import TraceFinding
from loadlint.trace.metrics import Rank

#: Steps listed one by one in the text table; longer runs show the first
#: and last ones and the percentiles.
_LISTED = 12


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def summary(ranks: list[Rank]) -> dict[str, Any]:
    """The summary object of one rank, or of several pooled (their steps
    together; shares and bandwidths over the totals)."""
    steps = [s for r in ranks for s in r.steps]
    total = sum(s.dur_ms for s in steps)
    gpu = any(r.has_gpu for r in ranks)
    pageable = sum(r.pageable_bytes for r in ranks)
    pinned = sum(r.pinned_bytes for r in ranks)
    pageable_us = sum(r.pageable_us for r in ranks)
    pinned_us = sum(r.pinned_us for r in ranks)
    devices = sorted({r.device for r in ranks})
    return {
        "steps": len(steps),
        "median_step_ms": _r(statistics.median(s.dur_ms for s in steps)) if steps else None,
        "data_wait_share": _r(sum(s.data_wait_ms for s in steps) / total if total else 0.0),
        "gpu_busy_share": _r(sum(s.gpu_busy_ms or 0.0 for s in steps) / total if total else 0.0) if gpu else None,
        "h2d": {
            "pageable_bytes": pageable,
            "pinned_bytes": pinned,
            "pageable_gbps": _r(pageable / pageable_us / 1e3 if pageable_us and pageable else None),
            "pinned_gbps": _r(pinned / pinned_us / 1e3 if pinned_us and pinned else None),
        },
        "device": devices[0] if len(devices) == 1 else ", ".join(devices),
    }


def rank_json(diagnosis: Diagnosis) -> dict[str, Any]:
    rank = diagnosis.rank
    return {
        "summary": summary([rank]),
        "steps": [{"index": s.index, "dur_ms": _r(s.dur_ms), "data_wait_ms": _r(s.data_wait_ms), "gpu_busy_ms": _r(s.gpu_busy_ms)}
                  for s in rank.steps],
        "findings": [f.as_json() for f in diagnosis.findings],
    }


def as_json(diagnoses: list[Diagnosis]) -> dict[str, Any]:
    if len(diagnoses) == 1:
        return rank_json(diagnoses[0])
    return {"ranks": [rank_json(d) for d in diagnoses], "summary": summary([d.rank for d in diagnoses])}


def compare_json(before: list[Diagnosis], after: list[Diagnosis]) -> dict[str, Any]:
    b, a = as_json(before), as_json(after)
    ms_before, ms_after = b["summary"]["median_step_ms"], a["summary"]["median_step_ms"]
    ratio = round(ms_before / ms_after, 3) if ms_before and ms_after else None
    return {"before": b, "after": a, "step_time_ratio": ratio}


# -- text ---------------------------------------------------------------


def _cell(value: float | None, of: float | None = None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" + (f" ({value / of:.0%})" if of else "")


def _header(rank: Rank) -> str:
    who = f"rank {rank.rank}, " if rank.rank is not None else ""
    inferred = ", steps inferred from DataLoader __next__ spans (no ProfilerStep)" if rank.step_source != "ProfilerStep" else ""
    return f"{rank.path} ({who}{rank.device}, {len(rank.steps)} steps, {rank.iterator}{inferred})"


def rank_table(rank: Rank) -> list[str]:
    lines = [_header(rank), f"  {'step':>6}  {'time ms':>10}  {'data wait ms':>16}  {'GPU busy ms':>16}"]
    steps = rank.steps
    shown = steps if len(steps) <= _LISTED else steps[: _LISTED // 2] + steps[-_LISTED // 2:]
    for i, s in enumerate(shown):
        if len(steps) > _LISTED and i == _LISTED // 2:
            lines.append(f"  {'...':>6}")
        lines.append(f"  {s.index:>6}  {s.dur_ms:>10.2f}  {_cell(s.data_wait_ms, s.dur_ms):>16}  {_cell(s.gpu_busy_ms, s.dur_ms):>16}")
    if steps:
        med = statistics.median
        gpu = med(s.gpu_busy_ms or 0.0 for s in steps) if rank.has_gpu else None
        step = med(s.dur_ms for s in steps)
        lines.append(f"  {'median':>6}  {step:>10.2f}  {_cell(med(s.data_wait_ms for s in steps), step):>16}  {_cell(gpu, step):>16}")
    gpu_share = rank.gpu_busy_share
    lines.append(f"  data wait {rank.data_wait_share:.0%} of step time; GPU busy "
                 + (f"{gpu_share:.0%}" if gpu_share is not None else "not measured (no GPU events in the trace)"))
    if rank.pageable_bytes or rank.pinned_bytes:
        lines.append(f"  host-to-device: pageable {rank.pageable_bytes:,} B" + (f" at {rank.pageable_gbps:.1f} GB/s" if rank.pageable_gbps else "")
                     + f", pinned {rank.pinned_bytes:,} B" + (f" at {rank.pinned_gbps:.1f} GB/s" if rank.pinned_gbps else ""))
    if rank.blocking:
        lines.append(f"  blocking copies: {len(rank.blocking)} ({sum(us for _, us in rank.blocking) / 1e3:.2f} ms)")
    if rank.epoch_starts:
        lines.append("  long first steps of a pass over the loader: " + ", ".join(str(i) for i in rank.epoch_starts))
    return lines


def finding_lines(rank: Rank, finding: TraceFinding, *, first_at_call: bool = True) -> list[str]:
    """A finding, ruff-style; the mapped call's static findings under the
    first finding at that call only."""
    loc = finding.location
    where = f"{loc['path']}:{loc['row']}:{loc['column']}" if loc else rank.path
    lines = [f"{where}: {finding.code} {finding.message}"]
    if finding.mapping and first_at_call:
        lines.append(f"  = DataLoader call: {finding.mapping}")
        lines += [f"  = static: {line}" for line in finding.static]
    return lines


def as_text(diagnoses: list[Diagnosis]) -> str:
    lines: list[str] = []
    for d in diagnoses:
        lines += rank_table(d.rank) + [""]
    found = [(d.rank, f) for d in diagnoses for f in d.findings]
    seen: set[str] = set()
    for rank, finding in found:
        key = repr(finding.location)
        lines += finding_lines(rank, finding, first_at_call=key not in seen)
        seen.add(key)
    if found:
        lines.append(f"Found {len(found)} finding{'s' if len(found) != 1 else ''} in the trace{'s' if len(diagnoses) > 1 else ''}.")
    else:
        lines.append("No loader bottleneck found in the trace.")
    return _printed(lines)


def _codes(diagnoses: list[Diagnosis]) -> str:
    return ", ".join(sorted({f.code for d in diagnoses for f in d.findings})) or "none"


def compare_text(before: list[Diagnosis], after: list[Diagnosis]) -> str:
    data = compare_json(before, after)
    b, a = data["before"]["summary"], data["after"]["summary"]

    def fmt(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:.3f}"
        return f"{value:,}" if isinstance(value, int) else str(value)

    rows = [("steps", "steps"), ("median step ms", "median_step_ms"), ("data wait share", "data_wait_share"),
            ("GPU busy share", "gpu_busy_share")]
    lines = [f"{'':<22}{'before':>18}{'after':>18}"]
    lines += [f"{label:<22}{fmt(b[key]):>18}{fmt(a[key]):>18}" for label, key in rows]
    lines += [f"{'h2d ' + key.replace('_', ' '):<22}{fmt(b['h2d'][key]):>18}{fmt(a['h2d'][key]):>18}" for key in b["h2d"]]
    lines.append(f"{'device':<22}{b['device']:>18}{a['device']:>18}")
    lines.append(f"{'findings':<22}{_codes(before):>18}{_codes(after):>18}")
    ratio = data["step_time_ratio"]
    lines.append(f"median step time ratio (before/after): {ratio:.2f}x" if ratio else "median step time ratio: -")
    return _printed(lines)


def _printed(lines: list[str]) -> str:
    # A trace's strings (device, iterator class, file names, stack frames)
    # and the source they map to are the repository's: each line is escaped
    # as every report line is.
    return "".join(visible(line) + "\n" for line in lines)
