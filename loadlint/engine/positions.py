"""Where a libcst node stands in its source: rows, columns and offsets.

Positions are computed only when asked for, per statement (the innermost
one in an indented block that holds the node, see ``Positions.range``), and
for a large module parsed in part (see ``loadlint.cst.slicing``) mapped back to
the rows of the whole file.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Mapping, Sequence

import libcst as cst
from libcst.metadata import CodeRange

from loadlint.cst.codegen import code_for_node, code_ranges
from loadlint.cst.slicing import Slice, parse_module
from loadlint.sources.source import LINE_BREAK, line_starts
from loadlint.types import Edit, Location
from loadlint.cst.rows import statement_rows
from loadlint.cst.walk import Unit, statement_units


@dataclass
class Positions:
    """Maps nodes to source offsets (positions are computed only when needed)."""

    module: cst.Module
    text: str
    #: When ``module`` holds some statements of ``text`` only (a large
    #: module): those statements and the original row of each of their lines.
    piece: Slice | None = None
    #: ``statement_units(module)`` when the caller has it (the facts' walk found it).
    units: tuple[dict[int, int], list[Unit]] | None = None

    @cached_property
    def _ranges(self) -> Mapping[cst.CSTNode, CodeRange]:
        return code_ranges(self.module, self.module)

    @cached_property
    def _starts(self) -> list[int]:
        return line_starts(self.text)

    @cached_property
    def _statements(self) -> tuple[dict[int, int], list[Unit], dict[cst.CSTNode, int], dict[cst.CSTNode, int]] | None:
        """(node id -> its unit, the units, each statement's first line, each
        top-level one's last line): positions are then computed only for the
        units holding the nodes asked for, which is much faster than for the
        whole module."""
        rows = statement_rows(self.module, self.text if self.piece is None else self.piece.text)
        if rows is None:
            return None
        return (*(statement_units(self.module) if self.units is None else self.units), *rows)

    @cached_property
    def _local(self) -> dict[int, tuple[Mapping[cst.CSTNode, CodeRange], int]]:
        return {}

    def range(self, node: cst.CSTNode) -> tuple[Location, Location]:
        """1-based rows and 1-based columns, end exclusive."""
        statements = None if "_ranges" in self.__dict__ else self._statements
        index = statements[0].get(id(node)) if statements is not None else None
        if statements is None or index is None:
            code_range, shift = self._ranges[node], 0
        else:
            if index not in self._local:
                stmt, indents = statements[1][index]
                # Rendered inside its blocks' indentation: columns are the file's,
                # rows are shifted to where Python's parser starts the statement.
                ranges = code_ranges(stmt, self.module, indents)
                anchor = stmt.body[0] if type(stmt) is cst.SimpleStatementLine else stmt
                self._local[index] = ranges, statements[2][stmt] - ranges[anchor].start.line
            ranges, shift = self._local[index]
            code_range = ranges[node]
        start, end = code_range.start, code_range.end
        first, last = self._row(start.line + shift), self._row(end.line + shift)
        return Location(first, start.column + 1), Location(last, end.column + 1)

    def block_indent(self, node: cst.CSTNode) -> str | None:
        """The indentation of the block holding ``node``'s statement, where
        its unit tells it (not inside a match statement, whose cases indent
        themselves): ``node`` was located by rendering it with this indent."""
        statements = None if "_ranges" in self.__dict__ else self._statements
        index = statements[0].get(id(node)) if statements is not None else None
        if statements is None or index is None:
            return None
        stmt, indents = statements[1][index]
        return None if type(stmt) is cst.Match else "".join(indents)

    @cached_property
    def bounds(self) -> list[int] | None:
        """``statement_bounds`` of the module (None for a module parsed in part)."""
        if self.piece is not None:
            return None
        statements = self._statements
        return rendered_bounds(self.module, self.text) if statements is None else statement_bounds(self.module, self.text, statements[2:])

    def _row(self, line: int) -> int:
        return line if self.piece is None else self.piece.row(line)

    def offset(self, location: Location) -> int:
        """The character offset of ``location`` in the text."""
        return self._starts[location.row - 1] + location.column - 1

    def span(self, node: cst.CSTNode) -> tuple[int, int, Location, Location]:
        """(start offset, end offset, start, end) of ``node``."""
        start, end = self.range(node)
        return self.offset(start), self.offset(end), start, end

    def line_text(self, row: int) -> str:
        """Line ``row`` without its line break."""
        starts = self._starts
        begin = starts[row - 1]
        stop = starts[row] if row < len(starts) else len(self.text)
        return LINE_BREAK.sub("", self.text[begin:stop])

    def starting_at(self, row: int) -> list[cst.CSTNode]:
        """The nodes whose code starts on line ``row``."""
        return [node for node, code_range in self._ranges.items() if self._row(code_range.start.line) == row]

    def location_of_offset(self, offset: int) -> Location:
        """The 1-based location of a character offset."""
        row = bisect.bisect_right(self._starts, offset)
        return Location(row, offset - self._starts[row - 1] + 1)


#: Lines of comments or blank lines only (a block's trailing comments).
_COMMENT_LINES = re.compile(r"(?:[ \t\f]*(?:#[^\r\n]*)?(?:\r\n|\r|\n))*")


def statement_bounds(
    module: cst.Module, text: str, rows: tuple[Mapping[cst.CSTNode, int], Mapping[cst.CSTNode, int]] | None = None,
) -> list[int] | None:
    """Where each top-level statement of ``module`` (parsed from ``text``)
    starts in ``text``, its leading comments included, and where the last
    one ends; None when the module does not render back to ``text`` so.

    The lines each statement's code starts and ends on come from Python's
    parser (``rows``: ``statement_rows``, given when the caller has them);
    only what leads a statement (comments, blank lines, decorators) is
    rendered, which is many times faster than rendering every statement.
    Where the two parsers' views differ, every statement is rendered."""
    if not module.has_trailing_newline:
        return None
    rows = statement_rows(module, text) if rows is None else rows
    if rows is None or not module.body:
        return rendered_bounds(module, text)
    firsts, lasts = rows

    def render(node: cst.CSTNode) -> str:
        return code_for_node(node, module)

    starts = line_starts(text)
    header = "".join(render(line) for line in module.header)
    bounds: list[int] = []
    after = len(header)  # where the previous statement's last line of code ends
    for stmt in module.body:
        row, last = firsts.get(stmt), lasts.get(stmt)
        if row is None or last is None or not row <= last < len(starts):
            return rendered_bounds(module, text)
        lead: list[cst.CSTNode] = [*stmt.leading_lines]
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            lead += [*stmt.decorators, *stmt.lines_after_decorators]
        code = "".join(render(node) for node in lead)
        begin = starts[row - 1] - len(code)
        # What leads the statement is the text before its first line, and
        # only comments lie between it and the previous statement's code.
        if begin < after or text[begin : starts[row - 1]] != code or not _COMMENT_LINES.fullmatch(text, after, begin):
            return rendered_bounds(module, text)
        bounds.append(begin)
        after = starts[last]
    footer = "".join(render(line) for line in module.footer)
    end = len(text) - len(footer)
    if bounds[0] != len(header) or not text.startswith(header) or not text.endswith(footer) or end < after:
        return rendered_bounds(module, text)
    if not _COMMENT_LINES.fullmatch(text, after, end):
        return rendered_bounds(module, text)
    bounds.append(end)
    return bounds


def rendered_bounds(module: cst.Module, text: str) -> list[int] | None:
    """``statement_bounds`` by rendering every statement (where the two
    parsers disagree)."""
    if not module.has_trailing_newline:
        return None
    offset = sum(len(code_for_node(line, module)) for line in module.header)
    bounds = [offset]
    for stmt in module.body:
        offset += len(code_for_node(stmt, module))
        bounds.append(offset)
    footer = sum(len(code_for_node(line, module)) for line in module.footer)
    return bounds if offset + footer == len(text) else None


#: What an inserted text cannot start with to be parsed with the statement
#: it is inserted before: only a statement starting its line is one of the file's.
_NOT_A_STATEMENT = ("", " ", "\t", "\f", "\r", "\n", "#", "\\")


def reparse(
    module: cst.Module, text: str, bounds: list[int], edits: Sequence[Edit], new_text: str, chunks: list[str] | None = None,
) -> cst.Module | None:
    """``module`` with the top-level statements ``edits`` change parsed again
    from ``new_text`` (``text`` with ``edits`` applied), the others kept:
    checking a fix re-parses the function it changes, not the file.  None
    when an edit is not inside one statement or the statement does not
    parse on its own as it did in the file (then parse all of ``new_text``).
    Statements inserted where one starts (a fix's added import) are parsed
    on their own, ahead of it (with it when it is edited too): they start a
    line of their own, as a statement of the file.  ``chunks`` receives the
    texts parsed."""
    touched: dict[int, list[Edit]] = {}
    for edit in edits:
        index = bisect.bisect_right(bounds, edit.start) - 1
        if index < 0 or index >= len(module.body) or not bounds[index] <= edit.start <= edit.end < bounds[index + 1]:
            return None
        if edit.start == bounds[index] and not (edit.start == edit.end and edit.content[:1] not in _NOT_A_STATEMENT):
            return None
        touched.setdefault(index, []).append(edit)
    body = list(module.body)
    pieces: list[tuple[int, int, str]] = []
    for index in sorted(touched, reverse=True):
        begin, end = bounds[index], bounds[index + 1]
        kept = body[index:index]
        only = touched[index][0]
        if len(touched[index]) == 1 and only.start == only.end == begin and only.content.endswith("\n"):
            # Inserted before the statement, which stays as it is.
            chunk, end, kept = only.content, begin, body[index : index + 1]
        else:
            chunk = text[begin:end]
            for edit in sorted(touched[index], key=lambda e: -e.start):
                chunk = chunk[: edit.start - begin] + edit.content + chunk[edit.end - begin :]
        try:
            alone = parse_module(chunk, config=module.config_for_parsing)
        except Exception:  # the whole text's parse says what is wrong
            return None
        # Trailing comments the file gives the statement's last block: its own footer.
        if alone.footer or not alone.body:
            return None
        first = alone.body[0]
        stmts = [first.with_changes(leading_lines=[*alone.header, *first.leading_lines]), *alone.body[1:]]
        body[index : index + 1] = [*stmts, *kept]
        pieces.append((begin, end, chunk))
        if chunks is not None:
            chunks.append(chunk)
    # The statements' text with the edits must be the text checked.
    rebuilt = []
    cursor = 0
    for begin, end, chunk in sorted(pieces):
        rebuilt.append(text[cursor:begin])
        rebuilt.append(chunk)
        cursor = end
    rebuilt.append(text[cursor:])
    if "".join(rebuilt) != new_text:
        return None
    return module.with_changes(body=body)
