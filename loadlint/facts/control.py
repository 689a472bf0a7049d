"""The cursor's control flow: the blocks and loops around the node.

A part of ``loadlint.facts.cursor.Cursor``: the enclosing if/for/while/
try/match blocks of the function (a ``**dict`` change under a condition
the call is not under), the loops (what a loader is iterated in) and the
``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from loadlint.facts.names import LoopFrame
from loadlint.facts.resolve import dotted_name, string_value


def _is_main_guard(test: cst.BaseExpression) -> bool:
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return False
    left, right = test.left, test.comparisons[0].comparator
    if type(test.comparisons[0].operator) is not cst.Equal:
        return False
    names = {dotted_name(left), dotted_name(right)}
    strings = {string_value(n) for n in (left, right) if type(n) is cst.SimpleString}
    return "__name__" in names and "__main__" in strings


def names_in(target: cst.BaseExpression) -> Iterator[str]:
    """The names an assignment or loop target binds."""
    if type(target) is cst.Name:
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from names_in(element.value)
    elif type(target) is cst.StarredElement:
        yield from names_in(target.value)


class FlowCursor:
    """The loops and blocks the traversal is in, within its function."""

    def __init__(self) -> None:
        self.loops: list[LoopFrame] = []
        #: ids of the enclosing if/for/while/try/match blocks of the function
        #: (negated for an ``if``'s else branch).
        self.path: list[int] = []
        self.main_guard_depth = 0
        #: The frame of the ``for`` being entered (its body pushes it).
        self.frame: LoopFrame | None = None
        self._saved: list[tuple[list[LoopFrame], list[int]]] = []

    def _enter_function(self) -> None:
        """A function's body starts outside any loop or block."""
        self._saved.append((self.loops, self.path))
        self.loops, self.path = [], []

    def _leave_function(self) -> None:
        self.loops, self.path = self._saved.pop()

    def _leave_block(self) -> None:
        if self.path:
            self.path.pop()

    def visit_If(self, node: cst.If) -> None:
        self.path.append(id(node))
        if _is_main_guard(node.test):
            self.main_guard_depth += 1

    def visit_If_orelse(self, node: cst.If) -> None:
        # The else branch gets the negated id: the two branches of one ``if``
        # exclude each other (``resolve.reaches``), and neither is a prefix
        # of the other's path, so a binding in one never runs on every path
        # to a read in the other.
        if self.path and self.path[-1] == id(node):
            self.path[-1] = -id(node)

    def leave_If(self, original_node: cst.If) -> None:
        self._leave_block()
        if _is_main_guard(original_node.test):
            self.main_guard_depth -= 1

    def visit_Try(self, node: cst.Try) -> None:
        self.path.append(id(node))

    def leave_Try(self, original_node: cst.Try) -> None:
        self._leave_block()

    def visit_Match(self, node: cst.Match) -> None:
        self.path.append(id(node))

    def leave_Match(self, original_node: cst.Match) -> None:
        self._leave_block()

    def visit_For(self, node: cst.For) -> None:
        targets = frozenset(names_in(node.target))
        self.frame = LoopFrame(node, targets, var=node.target.value if type(node.target) is cst.Name else None)
        self.path.append(id(node))

    def visit_For_body(self, node: cst.For) -> None:
        assert self.frame is not None and self.frame.node is node
        self.loops.append(self.frame)

    def leave_For_body(self, node: cst.For) -> None:
        self.loops.pop()

    def leave_For(self, original_node: cst.For) -> None:
        self._leave_block()

    def visit_While(self, node: cst.While) -> None:
        self.path.append(id(node))

    def visit_While_body(self, node: cst.While) -> None:
        self.loops.append(LoopFrame(node, frozenset()))

    def leave_While_body(self, node: cst.While) -> None:
        self.loops.pop()

    def leave_While(self, original_node: cst.While) -> None:
        self._leave_block()
