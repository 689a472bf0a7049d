"""Back from the trace to the code: which ``DataLoader(...)`` call the run
iterated, how sure that is, and that call's static findings and fixes.

The calls are those ``check`` sees, through the facts it computes
(``loadlint.api.loader_sites``): the project is read, never imported or
run, as ``check`` reads it (the guarded read, the pre-filter, a large
module parsed in part, a file too deeply nested skipped), and each call's
arguments are mapped to torch's parameters as the rules map them.
Evidence, best first: the Python frames of a ``with_stack=True`` trace name
the function that iterates the loader; without them, the iterator class
says whether the loader has workers (``num_workers`` as ``check`` resolves
it; an overridable default, a command-line option's, counts as unknown),
and a project's entry script (a file with a ``__main__`` guard) says which
loader training iterates.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from loadlint.api import LoaderSite, loader_sites
from loadlint.trace.findings import MULTI, SINGLE

_FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<function>.+)$")
_SKIP_DIRS = frozenset({".git", ".venv", "venv", "site-packages", "node_modules", "__pycache__", ".tox", "build", "dist"})


@dataclass(frozen=True)
class Match:
    call: LoaderSite
    confidence: str  # "high", "medium" or "low"
    why: str


def _python_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    found: list[Path] = []
    # Linked folders are not entered: what a repository links to is not the repository's.
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        found.extend(Path(folder, name) for name in files if name.endswith(".py"))
    return sorted(found)


def loader_calls(root: Path, within: str | None = None) -> list[LoaderSite]:
    """Every ``DataLoader(...)`` call under ``root`` and where it is iterated.
    Links must stay in ``within`` (default: ``root`` when it is a folder; a
    file the user names is read wherever it is)."""
    found: list[LoaderSite] = []
    if within is None and not root.is_file():
        within = str(root)
    for path in _python_files(root):
        found += loader_sites(path, within)
    return found


def _compatible(call: LoaderSite, iterators: list[str]) -> bool:
    if call.workers is None:
        return True
    return (SINGLE in iterators and call.workers == 0) or (MULTI in iterators and call.workers > 0)


def _frame(frame: str) -> tuple[str, int, str] | None:
    m = _FRAME.match(frame)
    return (m["file"], int(m["line"]), m["function"]) if m else None


def _prefer(calls: list[LoaderSite], pinned: bool | None) -> list[LoaderSite]:
    """Those whose pin_memory agrees with the trace's copies (pinned
    or pageable), when any; a hint, not a filter: other tensors than the
    batch may be copied."""
    agreeing = [c for c in calls if pinned is None or c.pinned is None or c.pinned == pinned]
    return agreeing or calls


def match(root: Path, iterators: list[str], callers: list[str], pinned: bool | None = None,
          within: str | None = None) -> Match | None:
    """The loader call the trace's run iterated, or None.  ``pinned``: whether
    the trace's host-to-device copies are mostly pinned (None: no copies);
    ``within``: as for ``loader_calls``."""
    calls = loader_calls(root, within)
    for caller in callers:
        frame = _frame(caller)
        if frame is None:
            continue
        file, line, function = frame
        in_file = [c for c in calls if c.path.as_posix().endswith(file.lstrip("./"))]
        # A frame's line is its function's first line, or for a frame
        # already running when profiling began, the line it was at then.
        here = [c for c in in_file if any(fn is not None and fn[0] == function and fn[1] <= line <= fn[2] for fn in c.iterated_in)
                or (line == 1 and function == "<module>" and None in c.iterated_in)]
        picked = _prefer([c for c in here if _compatible(c, iterators)] or here, pinned)
        if len(picked) == 1:
            return Match(picked[0], "high", f"the trace's Python stack: {caller} iterates it")
        candidates = _prefer([c for c in in_file if _compatible(c, iterators)], pinned)
        if len(candidates) == 1:
            return Match(candidates[0], "medium", f"the trace's Python stack: {caller} iterates a loader built here")
    compatible = _prefer([c for c in calls if _compatible(c, iterators)], pinned)
    if not compatible:
        return None
    iterated = [c for c in compatible if c.iterated_in]
    entry = [c for c in iterated if c.entry]
    kind = "without workers" if SINGLE in iterators else "with workers"
    if pinned is not None:
        kind += ", pinned" if pinned else ", not pinned"
    for pool, how in ((entry, "the entry script iterates"), (iterated, "the project iterates")):
        if len(pool) == 1:
            return Match(pool[0], "medium", f"the only DataLoader ({kind}) that {how}")
    best = entry or iterated or compatible
    return Match(best[0], "low", f"first of {len(best)} DataLoader calls ({kind}) that could be it")
