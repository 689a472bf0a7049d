"""The fixes of project findings: decided where the findings are made, so
that ``[*]`` means what ``fix`` does, and written by ``fix`` between the
rounds of a run until none is left.

A project finding asks for keywords set on one call (``non_blocking=True``
at a ``.to()``, ``persistent_workers=True`` or ``pin_memory=True`` at a
``DataLoader(``).  The fix is rendered like a rule's, in the file where the
finding is, and tried there: a fix after which every rule (selected or not)
finds something new in that file that has no fix of its own is withheld,
with the reason.  What a fix implies elsewhere (``non_blocking=True`` at the
transfers of a loader just pinned) is a project finding of the next round,
with its own fix.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from loadlint.engine.analysis import analyse
from loadlint.engine.decision import guard_options
from loadlint.sources.files import Staging, read_source, write_fixes
from loadlint.sources.source import DecodeError, decode
from loadlint.engine.summaries import numbered_facts
from loadlint.types import Edit, FileResult, Finding, Fix, Options

if TYPE_CHECKING:
    from loadlint.project.reporter import Change

NOTEBOOK = ".ipynb"
#: (path, code, row, column) of a project finding.
Key = tuple[str, str, int, int]


def decide(
    found: dict[str, list[Finding]],
    changes: dict[Key, Change],
    read_text: Callable[[str], str | None],
    file_options: Callable[[str], Options],
    withheld: dict[tuple[str, str], str] | None = None,
) -> None:
    """Give each finding of ``found`` the fix its change asks for, or the
    reason it is withheld.  ``withheld``: by (path, code), why the fixes of
    every finding of the code in that file are withheld (LL013's guard in
    a script another module imports), whatever they would change."""
    for path, findings in found.items():
        asked = [(f, changes[_key(f)]) for f in findings if _key(f) in changes]
        if asked:
            held = {code: why for (where, code), why in (withheld or {}).items() if where == path}
            _decide_file(path, asked, read_text(path), file_options(path), held)


def _key(finding: Finding) -> Key:
    return finding.path, finding.code, finding.location.row, finding.location.column


def _decide_file(
    path: str, asked: list[tuple[Finding, Change]], text: str | None, options: Options, withheld: dict[str, str]
) -> None:
    import libcst as cst

    from loadlint.engine.fixes import Builder, FixError, apply_edits
    from loadlint.project.reporter import Guard
    from loadlint.rules.base import CallChange, FixSpec
    from loadlint.rules.ll013_missing_main_guard import guard_fix
    from loadlint.engine.withhold import introduced, reason

    found = None if text is None else numbered_facts(text)
    if text is None or found is None:
        return
    positions, nodes, facts = found
    builder = Builder(positions.module, positions)
    guard = guard_options(options)
    before: list[Finding] | None = None
    # Every LL013 of the script asks for one guard, from the first call on.
    starts = [nodes[c.at] for _, c in asked if isinstance(c, Guard) and 0 <= c.at < len(nodes)]
    #: The guard's verdict, tried once for all of them: (fix, why withheld).
    guarded_as: tuple[Fix | None, str | None] | None = None
    for finding, change in asked:
        why = withheld.get(finding.code)
        if why is not None:
            finding.fix_withheld = why
            continue
        if isinstance(change, Guard) and guarded_as is not None:
            finding.fix, finding.fix_withheld = guarded_as
            continue
        if isinstance(change, Guard):
            guarded = guard_fix(facts.statements, facts.names, starts)
            if guarded is None:
                continue
            if guarded.withheld is not None:
                finding.fix_withheld = guarded.withheld
                guarded_as = (None, guarded.withheld)
                continue
            spec = guarded
        else:
            ref, keywords, applicability, label = change
            node = nodes[ref] if 0 <= ref < len(nodes) else None
            # ``**kwargs`` may hold the keyword already.
            if type(node) is not cst.Call or any(arg.star for arg in node.args):
                continue
            spec = FixSpec("safe" if applicability == "safe" else "unsafe", label, calls=[CallChange(node, dict(keywords))])
        try:
            fix = builder.build(spec)
            fixed = apply_edits(text, list(fix.edits))
        except (FixError, ValueError):
            continue
        notebook = path.endswith(NOTEBOOK)
        if before is None:
            before = analyse(text, path, guard, notebook=notebook)[0]
        after = analyse(fixed, path, guard, notebook=notebook)[0]
        new = introduced(before, after, lambda f: f.fix is not None)
        if new is not None:
            finding.fix_withheld = reason(spec, new)
        else:
            finding.fix = fix
        if isinstance(change, Guard):
            guarded_as = (finding.fix, finding.fix_withheld)


def write(
    results: list[FileResult], unsafe: bool, read_as: dict[str, tuple[int, int] | None], staging: Staging | None = None
) -> bool:
    """Apply the fixes ``results``' findings carry to the files on disk (at
    most one per call: the next round renders the others again on the
    fixed text); counted on each result's ``applied``.  Whether any file
    was written.  ``read_as``: by absolute path, the (size, modification
    time) of each file as the run's last join read it: a project fix is
    written only to a file still so (another process may have changed it,
    and the fix's offsets with it).  ``staging``: a dry run's, which gets
    the writes instead of the disk."""
    wrote = False
    for result in results:
        notebook = result.path.endswith(NOTEBOOK)
        chosen = [
            f for f in result.findings
            if f.fix is not None and (unsafe or f.fix.applicability == "safe") and (f.cell is None) != notebook
        ]
        if not chosen or result.error is not None:
            continue
        path = Path(result.path)
        try:
            data = staging.read(path) if staging is not None else read_source(path)
            st = os.stat(path)
        except OSError:
            continue
        if staging is None and read_as.get(os.path.abspath(path)) != (st.st_size, st.st_mtime_ns):
            continue  # changed since the fixes were made: the next run makes them again
        edits: list[Edit] = []
        applied: list[Finding] = []
        for finding in sorted(chosen, key=lambda f: _start(f.fix)):
            assert finding.fix is not None
            if finding.fix.edits and all(e in edits for e in finding.fix.edits):
                applied.append(finding)  # the same edit: one guard for the script's LL013s
                continue
            if any(_overlaps(e, mine) for e in finding.fix.edits for mine in edits):
                continue
            edits.extend(finding.fix.edits)
            applied.append(finding)
        made = _apply(data, edits, notebook)
        if made is None:
            continue
        text, new = made
        if staging is not None:
            staging.stage(path, new)
            error = None
        else:
            error = write_fixes(path, data, new)
        if error is not None:
            result.error = error
            continue
        wrote = True
        result.fixed = text
        for finding in applied:
            result.applied[finding.code] = result.applied.get(finding.code, 0) + 1
    return wrote


def _apply(data: bytes, edits: list[Edit], notebook: bool) -> tuple[str, bytes] | None:
    """(the new text, its bytes) of a file with ``edits`` applied; a
    notebook's edits are offsets into its joined cells."""
    from loadlint.engine.fixes import FixError, apply_edits
    from loadlint.engine.notebook import encode, fix_joined

    if notebook:
        made = fix_joined(data, edits)
        return None if made is None else (made[0], encode(data, made[0]))
    try:
        source = decode(data)
        text = apply_edits(source.text, edits)
        return text, source.encode(text)
    except (DecodeError, FixError, UnicodeEncodeError):
        return None


def stage_fixed(results: list[FileResult], staging: Staging) -> None:
    """In a dry run: what the per-file pass fixed is what the project phase
    and the next round read."""
    for result in results:
        if result.fixed is None:
            continue
        if result.path.endswith(NOTEBOOK):
            staging.stage(result.path, result.fixed.encode("utf-8"))
        elif result.source is not None:
            try:
                staging.stage(result.path, result.source.encode(result.fixed))
            except UnicodeEncodeError:
                continue


def diff_from_disk(results: list[FileResult], staged: dict[str, bytes]) -> None:
    """At the end of a dry run: each changed file's result runs from the
    file as it is on disk to the last round's text, for ``--diff``."""
    from loadlint.engine.notebook import changed_cells

    for result in results:
        after = staged.get(os.path.realpath(result.path))
        if after is None:
            continue
        try:
            data = read_source(result.path)
            if result.path.endswith(NOTEBOOK):
                result.cell_changes = changed_cells(data, after)
                result.fixed = after.decode("utf-8") if result.cell_changes else None
                continue
            original, fixed = decode(data), decode(after)
        except (OSError, DecodeError, UnicodeDecodeError):
            continue
        if fixed.text != original.text:
            result.source, result.fixed = original, fixed.text


def _start(fix: Fix | None) -> int:
    return min((e.start for e in fix.edits), default=0) if fix is not None else 0


def _overlaps(a: Edit, b: Edit) -> bool:
    return a.start < b.end and b.start < a.end or a.start == b.start
