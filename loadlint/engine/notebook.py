"""Jupyter notebooks (``.ipynb``): read, check and fix them in place.

A notebook is checked as one module: its code cells in cell order, so that
an import in cell 1 resolves a call in cell 7.  Positions are reported as
(cell, row inside the cell), the way ruff reports them.

Reading uses the ``json`` module only (``nbformat`` is a test dependency,
never a runtime one).  IPython syntax is masked line by line so the cell
parses, and each masked line keeps its line so positions stay true.  Each
cell is validated on its own first: Jupyter runs cells separately, so a cell
that does not parse is an LL900 at that cell and is left out, and an
indented cell can never silently become the body of a function in the
previous one (``loadlint.engine.ipython``).

Fixing never re-serialises the document: the new ``source`` values are
spliced into the original text at the exact spans of the edited cells'
``source`` entries, written in the file's own style (a string or a list of
lines, its indentation, its escaping of non-ASCII text).  Everything else
stays byte-for-byte, and the result is checked by parsing it back.
"""

from __future__ import annotations

import ast
import codecs
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from loadlint.engine.analysis import analyse
from loadlint.engine.decision import FixFailed, decided_findings, fix_text
from loadlint.engine.ipython import Masker


from loadlint.sources.prefilter import PREFILTER
from loadlint.sources.nbjson import splice
from loadlint.sources.files import write_fixes
from loadlint.rules import name_of
from loadlint.cst.slicing import parse_module
from loadlint.types import Edit, FileResult, Finding, Fix, FixRequest, Location, Options

#: A comment line before each cell in the joined module.  Fixes edit
#: statements, never these comments, so the fixed module splits back into
#: cells even when a fix inserts lines.
_MARKER = "# __loadlint_cell_{}__\n"
_MARKER_LINE = re.compile(r"^# __loadlint_cell_(\d+)__\r?\n", re.MULTILINE)
_CONVERT = "convert it with `jupyter nbconvert --to notebook --nbformat 4`"


# -- reading ------------------------------------------------------------------


class NotebookError(Exception):
    """The file is not a readable nbformat-4 notebook (LL901)."""

    def __init__(self, message: str, row: int = 1, column: int = 1, cell: int | None = None) -> None:
        super().__init__(message)
        self.row = row
        self.column = column
        self.cell = cell


@dataclass
class Cell:
    """One code cell of a notebook."""

    #: 1-based index over all cells (markdown and raw ones included).
    index: int
    source: str
    #: ``source`` was a list of lines in the file (not one string).
    as_list: bool


def load(data: bytes) -> tuple[str, bool, dict[str, Any], list[Cell], list[NotebookError]]:
    """(text, had BOM, document, code cells, per-cell problems); raises
    NotebookError when the file as a whole is unusable."""
    bom = data.startswith(codecs.BOM_UTF8)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"cannot read notebook: not UTF-8 (invalid byte 0x{data[exc.start]:02x})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"malformed notebook JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except RecursionError:
        raise NotebookError("malformed notebook JSON: nested too deeply") from None
    if not isinstance(doc, dict):
        raise NotebookError("not a notebook: the JSON document is not an object")
    version = doc.get("nbformat")
    if "worksheets" in doc or (isinstance(version, int) and not isinstance(version, bool) and version < 4):
        raise NotebookError(f"nbformat {version if isinstance(version, int) else 3} notebooks are not supported: {_CONVERT}")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        raise NotebookError(f"not a notebook: `nbformat` is {version!r}, not a number")
    cells = doc.get("cells")
    if cells is None:
        raise NotebookError("not a notebook: it has no `cells` list")
    if not isinstance(cells, list):
        raise NotebookError("not a notebook: `cells` is not a list")
    code: list[Cell] = []
    problems: list[NotebookError] = []
    for index, cell in enumerate(cells, 1):
        if not isinstance(cell, dict):
            problems.append(NotebookError(f"cell {index} is not a JSON object", cell=index))
            continue
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            code.append(Cell(index, "".join(source), True))
        elif isinstance(source, str):
            code.append(Cell(index, source, False))
        else:
            problems.append(NotebookError("`source` is neither a string nor a list of strings", cell=index))
    return text, bom, doc, code, problems


# -- the joined module --------------------------------------------------------


@dataclass
class _Part:
    cell: Cell
    masked: str
    #: A newline was added so the next cell starts on its own line.
    added_newline: bool = False


@dataclass
class Module:
    """The notebook's Python cells joined into one module, each after a marker line."""

    parts: list[_Part] = field(default_factory=list)

    def text(self) -> str:
        chunks = []
        for part in self.parts:
            chunks.append(_MARKER.format(part.cell.index))
            chunks.append(part.masked + ("\n" if part.added_newline else ""))
        return "".join(chunks)


def cell_rows(text: str) -> list[tuple[int, int]]:
    """(first row of the cell in the joined text, cell index), in order."""
    out = []
    for match in _MARKER_LINE.finditer(text):
        row = text.count("\n", 0, match.end()) + 1 if "\r" not in text else _row_of(text, match.end())
        out.append((row, int(match.group(1))))
    return out


def _row_of(text: str, offset: int) -> int:
    from loadlint.sources.source import position_of_offset

    return position_of_offset(text, offset)[0]


def _locate(rows: list[tuple[int, int]], row: int) -> tuple[int | None, int]:
    """Joined-text row -> (cell, row inside the cell)."""
    cell, start = None, 1
    for first, index in rows:
        if first > row:
            break
        cell, start = index, first
    if cell is None:
        return (rows[0][1], 1) if rows else (None, row)
    return cell, row - start + 1


def split_cells(text: str) -> dict[int, str]:
    """The joined text back into cell sources (still masked), by cell index."""
    out: dict[int, str] = {}
    matches = list(_MARKER_LINE.finditer(text))
    prefix = text[: matches[0].start()] if matches else ""
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        out[int(match.group(1))] = text[match.end() : end]
    if prefix and matches:
        # A fix inserted before the first cell (an import): it belongs to it.
        first = int(matches[0].group(1))
        out[first] = prefix + out[first]
    return out


def _map(finding: Finding, rows: list[tuple[int, int]]) -> Finding:
    cell, row = _locate(rows, finding.location.row)
    end_cell, end_row = _locate(rows, finding.end_location.row)
    if end_cell != cell:
        end_row = row
    fix = finding.fix
    if fix is not None:
        fix = Fix(fix.applicability, fix.message, tuple(_map_edit(edit, rows) for edit in fix.edits))
    finding.location = Location(row, finding.location.column)
    finding.end_location = Location(end_row, finding.end_location.column)
    finding.fix = fix
    finding.cell = cell
    return finding


def _map_edit(edit: Edit, rows: list[tuple[int, int]]) -> Edit:
    _, row = _locate(rows, edit.location.row)
    _, end_row = _locate(rows, edit.end_location.row)
    return Edit(edit.content, edit.start, edit.end, Location(row, edit.location.column), Location(end_row, edit.end_location.column))


def _cell_syntax_error(text: str) -> tuple[str, int, int] | None:
    """(message, row, column) when the cell does not parse; the C parser
    first (fast), libcst for the verdict, and the interpreter's message and
    position when both reject it (as for .py files)."""
    python: SyntaxError | None = None
    try:
        compile(text, "<cell>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        return None
    except SyntaxError as exc:
        python = exc
    except (ValueError, MemoryError, RecursionError):
        pass
    import libcst as cst

    from loadlint.cst.syntax import MAX_NESTING, too_deep_at
    from loadlint.cst.syntax import syntax_error

    # libcst's native parser overflows its stack on deep nesting (SIGSEGV).
    at = too_deep_at(text)
    if at is not None:
        return f"cell too complex to analyse: expressions nested more than {MAX_NESTING} deep", at[0], at[1]
    try:
        parse_module(text)
    except cst.ParserSyntaxError as exc:
        return syntax_error(text, exc, python)
    except RecursionError:
        return "cell too complex to analyse: nesting exceeds the recursion limit", 1, 1
    except UnicodeEncodeError:
        return None  # a lone surrogate: the engine reports it (LL901), with its place
    return None


# -- results --------------------------------------------------------------------


def _finding(code: str, message: str, path: str, row: int = 1, column: int = 1, cell: int | None = None) -> Finding:
    return Finding(code, name_of(code), message, path, Location(row, column), Location(row, column + 1), cell=cell)


def encode(original: bytes, text: str) -> bytes:
    """A notebook's new text as bytes, with the BOM ``original`` had."""
    return (codecs.BOM_UTF8 if original.startswith(codecs.BOM_UTF8) else b"") + text.encode("utf-8")


def check(path: Path | str, data: bytes, options: Options, fix: FixRequest | None = None) -> FileResult:
    """Check (and with ``fix``, fix) one notebook.  Never raises for a bad notebook."""
    name = str(path)
    result = FileResult(name)
    if not any(word.encode() in data for word in PREFILTER) and _is_json(data):
        return result  # an empty or broken notebook is still reported (LL901)
    try:
        _check(name, data, options, fix, result)
        if fix is not None and not fix.dry_run and result.fixed is not None:
            result.error = write_fixes(Path(path), data, encode(data, result.fixed))
            if result.error is not None:
                result.fixed = None
    except Exception as exc:  # one bad notebook must not stop the run
        result.error = f"internal error while checking notebook: {type(exc).__name__}: {exc}"
    return result


def _is_json(data: bytes) -> bool:
    """Whether a notebook's bytes are JSON: C's parse, a fraction of a cell's analysis."""
    try:
        json.loads(data)
    except (ValueError, RecursionError):  # UnicodeDecodeError included; load() says which
        return False
    return True


def _check(name: str, data: bytes, options: Options, fix: FixRequest | None, result: FileResult) -> None:
    try:
        text, bom, doc, cells, problems = load(data)
    except NotebookError as exc:
        if "LL901" in options.select:
            result.findings.append(_finding("LL901", str(exc), name, exc.row, exc.column, exc.cell))
        return
    if "LL901" in options.select:
        for problem in problems:
            result.findings.append(_finding("LL901", f"cannot read cell: {problem}", name, cell=problem.cell))
    checked = analyse_cells(cells, name, options, fix)
    result.cell_sources.update(checked.sources)
    result.applied = checked.applied
    if checked.error is not None:
        result.error = checked.error
    result.findings = sorted(result.findings + checked.findings, key=lambda f: (f.cell or 0, f.location.row, f.location.column, f.code))
    if fix is None:
        return
    changes = checked.changed_cells(checked.text)
    for index, new in changes.items():
        result.cell_changes.append((index, checked.sources[index], new))
    if changes:
        result.fixed = splice(text, doc, changes)


@dataclass
class Checked:
    """A notebook's Python cells analysed as one module (see ``analyse_cells``)."""

    #: Findings in cell coordinates, by cell, row, column and code.
    findings: list[Finding] = field(default_factory=list)
    #: The checked cells' sources (index -> source), as given.
    sources: dict[int, str] = field(default_factory=dict)
    #: The joined module the findings' edits (``start``/``end``) refer to:
    #: the fixed one when fixing.
    text: str = ""
    applied: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    module: Module = field(default_factory=Module)
    masker: Masker = field(default_factory=Masker)

    def changed_cells(self, text: str) -> dict[int, str]:
        """The cells whose source differs in ``text`` (the joined module after
        edits), unmasked: index -> new source."""
        if text == self.module.text():
            return {}
        new_sources = split_cells(text)
        changes: dict[int, str] = {}
        for part in self.module.parts:
            new = new_sources.get(part.cell.index)
            if new is None:
                continue
            if part.added_newline and new.endswith("\n"):
                new = new[:-1]
            new = self.masker.unmask(new, part.cell.source)
            if new != part.cell.source:
                changes[part.cell.index] = new
        return changes

    def apply(self, edits: tuple[Edit, ...] | list[Edit]) -> dict[int, str]:
        """The cells changed by ``edits`` (offsets into ``text``, applied together)."""
        text = self.text
        for edit in sorted(edits, key=lambda e: e.start, reverse=True):
            text = text[: edit.start] + edit.content + text[edit.end :]
        return self.changed_cells(text)


def analyse_cells(
    cells: list[Cell], name: str, options: Options, fix: FixRequest | None = None, decide: bool = True
) -> Checked:
    """Analyse code ``cells`` (in order) as one module, as Jupyter runs them:
    non-Python cells are skipped, a cell that does not parse is an LL900 at
    that cell and is left out.  With ``fix``, the findings are those left
    after fixing and ``text`` is the fixed module.  Without ``decide``, the
    fixes are not decided (an editor's diagnostics: none is offered from
    them)."""
    checked = Checked()
    if not any(word in cell.source for cell in cells for word in PREFILTER):
        return checked
    masker = checked.masker
    module = checked.module
    engine_findings: list[Finding] = []
    for cell in cells:
        masked = masker.mask(cell.source)
        if masked is None:
            continue
        error = _cell_syntax_error(masked)
        if error is not None:
            if "LL900" in options.select:
                engine_findings.append(_finding("LL900", error[0], name, error[1], error[2], cell.index))
            continue
        added = bool(masked) and not masked.endswith(("\n", "\r"))
        module.parts.append(_Part(cell, masked, added))
        checked.sources[cell.index] = cell.source
    joined = module.text()
    findings: list[Finding] = []
    fixed_joined = joined
    for _ in range(len(module.parts) + 1):
        joined = module.text()
        try:
            if fix is None:
                if decide:
                    findings = decided_findings(joined, name, options, notebook=True)
                else:
                    findings, _ = analyse(joined, name, options, notebook=True)
                fixed_joined = joined
            else:
                fixed_joined, findings, checked.applied = fix_text(joined, name, options, unsafe=fix.unsafe, notebook=True)
        except FixFailed as exc:
            findings, _ = analyse(joined, name, options, notebook=True)
            fixed_joined = joined
            rows = cell_rows(joined)
            checked.error = re.sub(
                r"\bat line (\d+)",
                lambda m: "at cell {}, line {}".format(*_locate(rows, int(m.group(1)))),
                str(exc),
            )
        # The cells parsed one by one; should the joined module still fail,
        # the failing cell is reported and left out, and the rest rechecked.
        broken = [f for f in findings if f.code == "LL900" and f.message.startswith("SyntaxError")]
        if not broken:
            break
        index, row = _locate(cell_rows(joined), broken[0].location.row)
        module.parts = [p for p in module.parts if p.cell.index != index]
        engine_findings.append(_finding("LL900", broken[0].message, name, row, broken[0].location.column, index))
    rows = cell_rows(fixed_joined)
    checked.text = fixed_joined
    checked.findings = engine_findings + [_map(f, rows) for f in findings]
    checked.findings.sort(key=lambda f: (f.cell or 0, f.location.row, f.location.column, f.code))
    return checked


# -- project analysis ----------------------------------------------------------


def _joined(cells: list[Cell]) -> Checked:
    """The cells project analysis reads as one module (magics masked, cells
    that do not parse left out), with what maps it back to the cells."""
    checked = Checked()
    for cell in cells:
        masked = checked.masker.mask(cell.source)
        if masked is None or _cell_syntax_error(masked) is not None:
            continue
        checked.module.parts.append(_Part(cell, masked, bool(masked) and not masked.endswith(("\n", "\r"))))
        checked.sources[cell.index] = cell.source
    checked.text = checked.module.text()
    return checked


def joined_text(data: bytes) -> str | None:
    """A notebook's Python cells as the one module its rules read (magics
    masked, cells that do not parse left out), for project analysis to
    summarise and locate; None when the bytes are not a usable notebook."""
    try:
        _, _, _, cells, _ = load(data)
    except NotebookError:
        return None
    return _joined(cells).text


def fix_joined(data: bytes, edits: list[Edit]) -> tuple[str, list[tuple[int, str, str]]] | None:
    """The notebook ``data`` with ``edits`` (offsets into its
    ``joined_text``) applied: (its new text, (cell, before, after) of each
    changed cell); None when it is not a usable notebook or nothing changes."""
    try:
        text, _, doc, cells, _ = load(data)
    except NotebookError:
        return None
    checked = _joined(cells)
    changes = checked.apply(edits)
    if not changes:
        return None
    return splice(text, doc, changes), [(index, checked.sources[index], new) for index, new in sorted(changes.items())]


def changed_cells(before: bytes, after: bytes) -> list[tuple[int, str, str]]:
    """(cell, before, after) of each code cell whose source differs."""
    try:
        old, new = load(before)[3], {cell.index: cell.source for cell in load(after)[3]}
    except NotebookError:
        return []
    return [(cell.index, cell.source, new[cell.index]) for cell in old if cell.index in new and new[cell.index] != cell.source]


def cell_of(text: str, row: int) -> tuple[int | None, int]:
    """(cell, row inside it) of a row of ``joined_text``."""
    return _locate(cell_rows(text), row)


def to_cells(findings: list[Finding], text: str) -> list[Finding]:
    """Findings located in ``joined_text`` moved to cell positions, as
    ``check`` reports a notebook's findings."""
    rows = cell_rows(text)
    return [_map(finding, rows) for finding in findings]
