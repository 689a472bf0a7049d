"""The ranks of a run under ``torch.distributed.run``, joined into one report.

Each rank is monitored in its own process and reports as a single run does
(:func:`loadlint.monitor.report.build`).  The joined report keeps rank 0's
report as its top level, so trace's contract holds (``trace --compare`` and
``--plot`` read rank 0), and adds ``ranks``, one row per rank, and
``distributed``.  Every rank's findings are listed under its number, and a
rank whose median data wait is far above the other ranks' is LL303 (trace's
rule across ranks, :func:`loadlint.trace.findings.across_ranks`): the others
wait for it at the next collective.
"""

from __future__ import annotations

import statistics
from typing import Any

from loadlint.monitor.instrument import config_text
from loadlint.monitor.report import MAPPING, as_json, findings_tail, tuning_lines
from loadlint.trace.findings import TraceFinding, across_ranks
from loadlint.trace.saved import from_report


def _row(number: int, report: dict[str, Any]) -> dict[str, Any]:
    entries = report["loaders"]
    top = max(entries, key=lambda e: len(e["steps"])) if entries else None
    steps = top["steps"] if top else []
    tuning = report.get("tuning")
    return {
        "rank": number, "exit_code": report.get("exit_code"), "wall_s": report.get("wall_s"),
        "call": top["call"] if top else None, "config": top["config"] if top else None,
        "batches": top["batches"] if top else 0, "batches_per_s": top["batches_per_s"] if top else None,
        "median_wait_ms": round(statistics.median(s["data_wait_ms"] for s in steps), 3) if steps else None,
        "median_step_ms": top["summary"]["median_step_ms"] if top else None,
        "data_wait_share": top["summary"]["data_wait_share"] if top else None,
        "tuning": None if not tuning else {key: tuning.get(key) for key in ("verdict", "speedup", "worker_cpus")}
        | {"after": tuning["after"]["config"]},
    }


def join(reports: list[tuple[dict[str, Any], dict[str, Any]]], nproc: int, command: list[str], code: int) -> dict[str, Any]:
    """One report from ``(place, report)`` per rank, in rank order."""
    numbers = [int(place.get("rank", i)) for i, (place, _) in enumerate(reports)]
    base = dict(reports[0][1])
    findings: list[TraceFinding] = []
    for number, (_, report) in zip(numbers, reports):
        for finding in report.get("_findings", []):
            finding.message = f"rank {number}: {finding.message}"
            finding.evidence["rank"] = number
            findings.append(finding)
    rows = [_row(number, report) for number, (_, report) in zip(numbers, reports)]
    measured = []
    for number, (_, report) in zip(numbers, reports):
        if report["steps"]:
            rank, _ = from_report(f"rank {number}", as_json(report))
            rank.rank = number
            measured.append((rank, report))
    lagging = across_ranks([rank for rank, _ in measured])
    straggler = None
    for i, finding in sorted(lagging.items()):
        rank, report = measured[i]
        top = max(report["loaders"], key=lambda e: len(e["steps"]))
        finding.location = {key: top["call"][key] for key in ("path", "row", "column")}
        finding.mapping = MAPPING
        # Only rank 0 read the call's static findings: the ranks run the same call.
        finding.static = list(top["static"]) or next((e["static"] for e in base["loaders"] if e["call"] == top["call"]), [])
        finding.evidence["rank"] = rank.rank
        finding.evidence["location_confidence"] = "high"
        findings.append(finding)
        straggler = rank.rank if straggler is None else straggler
    missing = sorted(set(range(nproc)) - set(numbers))
    notes = [f"rank {n}: {note}" for n, (_, report) in zip(numbers, reports) for note in report.get("notes", [])]
    if missing:
        notes.append("no measurements from rank " + ", ".join(map(str, missing)) + " (it ended before the monitor could write them)")
    base.update({
        "command": command, "exit_code": code, "wall_s": max((r["wall_s"] or 0.0) for r in rows),
        "findings": [f.as_json() for f in findings], "notes": notes, "ranks": rows,
        "distributed": {"nproc": nproc, "ranks_reported": len(rows), "straggler": straggler},
        "_findings": findings,
    })
    return base


def joined_text(report: dict[str, Any]) -> str:
    rows = report["ranks"]
    lines = [f"loadlint monitor: {' '.join(report['command'])} (exit {report['exit_code']}, {report['wall_s']:.1f} s, "
             f"{len(rows)} of {report['distributed']['nproc']} ranks reported)"]
    lines.append(f"  {'rank':>4}  {'loader':<24} {'configuration':<44} {'batches':>8} {'batch/s':>8} "
                 f"{'wait ms':>8} {'step ms':>8} {'wait':>5}  tuned")
    for row in rows:
        call = row["call"]
        where = f"{call['path']}:{call['row']}" if call else "-"
        tuned = row["tuning"]
        tuned_text = "-" if not tuned else f"{tuned['verdict']}: {config_text(tuned['after'])}"
        lines.append(f"  {row['rank']:>4}  {where:<24} {config_text(row['config']) if row['config'] else '-':<44} "
                     f"{row['batches']:>8} {row['batches_per_s'] or 0:>8.1f} {row['median_wait_ms'] or 0:>8.2f} "
                     f"{row['median_step_ms'] or 0:>8.2f} {row['data_wait_share'] or 0:>5.0%}  {tuned_text}")
    tuning = report.get("tuning")
    if tuning:
        first, *rest = tuning_lines(tuning)
        lines += ["", f"rank 0 {first}", *rest]
    return "\n".join(lines + findings_tail(report)) + "\n"

