"""Paths to diagnosed ranks: files or folders of per-rank traces, each
rank read in its own process."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from loadlint import processes
from loadlint.hardware import cpus
from loadlint.trace.events import load
from loadlint.trace.findings import TraceFinding, across_ranks, diagnose
from loadlint.trace.metrics import Rank, measure
from loadlint.trace.saved import is_monitor_report
from loadlint.trace.saved import read as read_report
from loadlint.trace.stream import TraceError

_SUFFIXES = (".json", ".json.gz")


@dataclass
class Diagnosis:
    rank: Rank
    findings: list[TraceFinding] = field(default_factory=list)


def trace_files(paths: list[Path]) -> list[Path]:
    """The trace files named, a folder's in name order."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(_SUFFIXES))
            if not inside:
                raise TraceError(f"{path}: no trace files (*.json, *.json.gz) in the folder")
            found += inside
        elif path.is_file():
            found.append(path)
        elif path.exists():
            raise TraceError(f"{path}: not a regular file")
        else:
            raise TraceError(f"{path}: no such file or folder")
    return found


def diagnose_file(path: Path) -> Diagnosis:
    if is_monitor_report(path):
        return Diagnosis(*read_report(path))
    rank = measure(load(path))
    if not rank.steps:
        raise TraceError(f"{path}: no complete step (no ProfilerStep#N and a single DataLoader __next__ span)")
    return Diagnosis(rank, diagnose(rank))


def diagnose_paths(paths: list[Path], jobs: int | None = None) -> list[Diagnosis]:
    """Each trace's diagnosis, ordered by rank; TraceError for the first
    unusable one."""
    files = trace_files(paths)
    workers = min(len(files), jobs or cpus.usable_here())
    results: list[Diagnosis] = []
    if workers > 1:
        from concurrent.futures.process import BrokenProcessPool

        try:
            with processes.pool(workers) as pool:
                for result in pool.map(diagnose_file, files):
                    results.append(result)
        except BrokenProcessPool:
            pass  # a worker died (killed, out of memory): the ranks not back are read here
    results += [diagnose_file(f) for f in files[len(results):]]
    results.sort(key=lambda d: (d.rank.rank is None, d.rank.rank or 0, d.rank.path))
    for index, finding in across_ranks([d.rank for d in results]).items():
        results[index].findings.append(finding)
    return results
