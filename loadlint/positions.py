"""Where a libcst node stands in its source: rows, columns and offsets.

Positions are computed only when asked for, per top-level statement (see
``Positions.range``), and for a large module parsed in part (see
``loadlint.slicing``) mapped back to the rows of the whole file.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import cached_property
from typing import Mapping

import libcst as cst
from libcst.metadata import CodeRange

from loadlint.slicing import Slice
from loadlint.source import LINE_BREAK, line_starts
from loadlint.types import Location
from loadlint.walk import statement_index, statement_lines


@dataclass
class Positions:
    """Maps nodes to source offsets (positions are computed only when needed)."""

    module: cst.Module
    text: str
    #: When ``module`` holds some statements of ``text`` only (a large
    #: module): those statements and the original row of each of their lines.
    piece: Slice | None = None

    @cached_property
    def _ranges(self) -> Mapping[cst.CSTNode, CodeRange]:
        from libcst.metadata import MetadataWrapper, PositionProvider

        return MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)

    @cached_property
    def _starts(self) -> list[int]:
        return line_starts(self.text)

    @cached_property
    def _statements(self) -> tuple[dict[cst.CSTNode, int], list[int]] | None:
        """(node -> its top-level statement, each statement's first line):
        positions are then computed only for the statements holding the nodes
        asked for, which is much faster than for the whole module."""
        lines = statement_lines(self.module, self.text if self.piece is None else self.piece.text)
        return None if lines is None else (statement_index(self.module), lines)

    @cached_property
    def _local(self) -> dict[int, tuple[Mapping[cst.CSTNode, CodeRange], int]]:
        return {}

    def range(self, node: cst.CSTNode) -> tuple[Location, Location]:
        """1-based rows and 1-based columns, end exclusive."""
        statements = None if "_ranges" in self.__dict__ else self._statements
        index = statements[0].get(node) if statements is not None else None
        if statements is None or index is None:
            code_range, shift = self._ranges[node], 0
        else:
            if index not in self._local:
                from libcst.metadata import MetadataWrapper, PositionProvider

                stmt = self.module.body[index]
                # The module's defaults (indent, newline) render the statement as in the file.
                alone = MetadataWrapper(self.module.with_changes(body=[stmt], header=(), footer=()), unsafe_skip_copy=True)
                ranges = alone.resolve(PositionProvider)
                self._local[index] = ranges, statements[1][index] - ranges[stmt].start.line
            ranges, shift = self._local[index]
            code_range = ranges[node]
        start, end = code_range.start, code_range.end
        first, last = self._row(start.line + shift), self._row(end.line + shift)
        return Location(first, start.column + 1), Location(last, end.column + 1)

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
