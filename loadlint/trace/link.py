"""Attach the mapped call's static findings to the trace's findings, and
apply their fixes through the fix engine (``--source DIR --fix``)."""

from __future__ import annotations

from pathlib import Path

from loadlint.api import check_paths
from loadlint.workspace.config import Overrides
from loadlint.output.report import diff
from loadlint.sources.boundary import project_root
from loadlint.trace.analyse import Diagnosis
from loadlint.trace.source import Match, match
from loadlint.types import Finding, FixRequest, Target


def _relative(path: Path) -> str:
    """Under the working folder, relative to it (as ``check`` prints paths)."""
    try:
        return str(path.resolve().relative_to(Path.cwd())) if path.is_absolute() else str(path)
    except ValueError:
        return str(path)


def _stack_file(callers: list[str]) -> Path | None:
    """Without ``--source``: the file of the frame that iterates the loader,
    when it is under the working folder (the frames' paths are relative
    to where the script ran); only that file is read, and only if it is in
    the working folder's project, links resolved."""
    for caller in callers:
        name = caller.rpartition("(")[0]
        path = Path(name)
        if name and not path.is_absolute() and ".." not in path.parts and path.is_file():
            return path
    return None


def call_findings(found: Match, target: Target | None = None) -> list[Finding]:
    """The static findings reported on the mapped call (for the hardware
    ``target`` the run trained on, when given)."""
    call = found.call
    run = check_paths([call.path], Overrides(target=target or Target()))
    return [f for f in run.findings if call.row <= f.location.row <= call.end_row]


def link(diagnoses: list[Diagnosis], root: Path | None, target: Target | None = None) -> list[Match]:
    """Map each rank's loader to its call and attach what is known there."""
    matches: list[Match] = []
    for d in diagnoses:
        base = root if root is not None else _stack_file(d.rank.callers)
        copies = d.rank.pinned_bytes + d.rank.pageable_bytes
        pinned = d.rank.pinned_bytes >= d.rank.pageable_bytes if copies else None
        # The stack names a file of the repository, not one the user named:
        # a link out of the project is not followed.
        within = None if root is not None else str(project_root(Path.cwd()))
        found = match(base, d.rank.iterators, d.rank.callers, pinned, within) if base is not None else None
        if found is None:
            continue
        matches.append(found)
        static = call_findings(found, target)
        location = {"path": _relative(found.call.path), "row": found.call.row, "column": found.call.column}
        for finding in d.findings:
            finding.location = location
            finding.mapping = f"{found.confidence} confidence ({found.why})"
            finding.evidence["location_confidence"] = found.confidence
            finding.static = [
                f"{_relative(Path(f.path))}:{f.location.row}:{f.location.column}: {f.code} {f.message}"
                + (" [*]" if f.fix is not None else "")
                for f in static
            ]
    return matches


def apply_fixes(matches: list[Match], target: Target | None = None) -> tuple[str, int, list[Match]]:
    """Fix the mapped calls' files with the codes found on those calls;
    (the unified diff, how many fixes, the matches too unsure to fix).  A
    low-confidence match is a guess: its file is left alone."""
    codes: dict[Path, set[str]] = {}
    unsure = [found for found in matches if found.confidence == "low"]
    for found in matches:
        if found.confidence == "low":
            continue
        codes.setdefault(found.call.path, set()).update(f.code for f in call_findings(found, target) if f.fix is not None)
    text, count = "", 0
    for path, selected in sorted(codes.items()):
        if not selected:
            continue
        run = check_paths([path], Overrides(select=tuple(sorted(selected)), target=target or Target()), fix=FixRequest(unsafe=False))
        chunk, fixed = diff(run)
        text += chunk
        count += fixed
    return text, count, unsure
