"""Where each statement of a libcst tree starts and ends, as rows of its text.

libcst keeps no positions; computing them for the whole tree costs as much
as the parse.  The rows of the statements come instead from the text's
logical lines (``scanned_rows``), paired with libcst's statements by the
word each starts with, or else from Python's own parser (``parsed_rows``).
"""

from __future__ import annotations

import ast
import bisect
import functools
import re
import warnings

import libcst as cst

from loadlint.cst.slicing import logical_lines
from loadlint.sources.source import line_starts


#: libcst's statement names that Python's parser spells otherwise.
_AST_NAMES = {"Del": "Delete"}
_BLOCKS = ("body", "handlers", "orelse", "finalbody", "cases")


@functools.lru_cache(maxsize=1)
def python_tree(text: str) -> tuple[ast.Module | None, bool]:
    """Python's own parse of ``text`` (top-level ``await`` allowed, as in a
    notebook; None when it does not compile) and whether it compiles
    without that allowance.  The last text's is kept: checking that a text
    compiles and locating its findings (where the text's lines do not pair
    up with libcst's statements) may both need it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes and the like: not ours to report
        for flags in (ast.PyCF_ONLY_AST, ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT):
            try:
                return compile(text, "<module>", "exec", flags, dont_inherit=True), flags == ast.PyCF_ONLY_AST
            except (SyntaxError, ValueError, MemoryError, RecursionError):
                continue
    return None, False


def statement_rows(module: cst.Module, text: str) -> tuple[dict[cst.CSTNode, int], dict[cst.CSTNode, int]] | None:
    """The line where each statement of ``module`` (parsed from ``text``)
    starts, after its leading comments and blank lines (for a line of simple
    statements, where its first one starts), and the last line of code of
    each top-level statement: from the text's logical lines
    (``scanned_rows``), else from Python's own parser; None where neither
    pairs up with libcst's statements."""
    return scanned_rows(module, text) or parsed_rows(module, text)


#: What each statement's logical line may start with (after ``async``).
_HEADS: dict[type, frozenset[str]] = {
    cst.FunctionDef: frozenset({"def"}), cst.ClassDef: frozenset({"class"}), cst.If: frozenset({"if", "elif"}),
    cst.For: frozenset({"for"}), cst.While: frozenset({"while"}), cst.With: frozenset({"with"}),
    cst.Try: frozenset({"try"}), cst.TryStar: frozenset({"try"}),
}
_COMPOUND = frozenset().union(*_HEADS.values())
#: Lines that continue a compound statement; decorators, which lead one.
_CLAUSE, _DECORATOR = "clause", "@"
_CLAUSES = frozenset({"else", "except", "finally"})
#: The first word of a logical line, or its first character.
_HEAD = re.compile(r"[ \t\f]*(?:async[ \t\f]+)?(?:([^\W\d]\w*)|([\s\S]))")
#: Characters a simple statement may start with, other than a name.
_SIMPLE_STARTS = frozenset("'\"([{-+~*.0123456789")


def scanned_rows(module: cst.Module, text: str) -> tuple[dict[cst.CSTNode, int], dict[cst.CSTNode, int]] | None:
    """``statement_rows`` from the logical lines of ``text`` (a bracket and
    string scan, ten times faster than Python's parser): each line of code
    that is not a decorator or a clause (``else:``, ``except:``, ``finally:``)
    starts the next statement in libcst's order.  None where a line starts
    oddly, a ``match`` statement makes ``case`` ambiguous, or the lines and
    statements do not pair up, keyword for keyword."""
    statements: list[cst.CSTNode] = []
    tops: list[int] = []  # where each top-level statement is in ``statements``
    for top in module.body:
        flat: list[cst.CSTNode | None] = []
        _flat_cst(top, flat)
        tops.append(len(statements))
        statements.extend(node for node in flat if node is not None)
    starts = line_starts(text)
    # (first word, first row, last row) of each line of code, in order.
    lines: list[tuple[str, int, int]] = []
    for begin, end in logical_lines(text):
        head = _HEAD.match(text, begin, end)
        if head is None:
            continue
        word, char = head.group(1), head.group(2)
        if word is None:
            if char in " \t\f\r\n#":  # a blank or comment line
                continue
            if char != _DECORATOR and char not in _SIMPLE_STARTS:
                return None
            word = char
        elif word in _CLAUSES:
            word = _CLAUSE
        at = head.start(1 if char is None else 2)
        lines.append((word, bisect.bisect_right(starts, at), bisect.bisect_right(starts, end - 1)))
    heads = [i for i, line in enumerate(lines) if line[0] not in (_DECORATOR, _CLAUSE)]
    if len(heads) != len(statements):
        return None
    first: dict[cst.CSTNode, int] = {}
    for node, index in zip(statements, heads):
        word = lines[index][0]
        allowed = _HEADS.get(type(node))
        if allowed is None:
            if word in _COMPOUND or type(node) is not cst.SimpleStatementLine:
                return None  # a ``match`` statement, or lines that do not pair up
        elif word not in allowed:
            return None
        first[node] = lines[index][1]
    # A top-level statement's code ends where the next one's decorators begin.
    last: dict[cst.CSTNode, int] = {}
    for k, top in enumerate(module.body):
        stop = heads[tops[k + 1]] if k + 1 < len(tops) else len(lines)
        while stop > heads[tops[k]] + 1 and lines[stop - 1][0] == _DECORATOR:
            stop -= 1
        last[top] = lines[stop - 1][2]
    return first, last


def parsed_rows(module: cst.Module, text: str) -> tuple[dict[cst.CSTNode, int], dict[cst.CSTNode, int]] | None:
    """``statement_rows`` from Python's own parser (both list the statements in the same order)."""
    tree, _ = python_tree(text)
    if tree is None:
        return None
    body = tree.body
    theirs: list[ast.stmt] = []
    for stmt in body:
        _flat_ast(stmt, theirs)
    ours: list[cst.CSTNode | None] = []
    for top in module.body:
        _flat_cst(top, ours)
    if len(ours) != len(theirs):
        return None
    starts: dict[cst.CSTNode, int] = {}
    for node, other in zip(ours, theirs):
        if node is None:
            continue
        head = node.body[0] if type(node) is cst.SimpleStatementLine else node
        name = type(head).__name__
        if _AST_NAMES.get(name, name) != type(other).__name__.removeprefix("Async"):
            return None
        # Both parsers start a decorated definition at ``def``/``class``.
        starts[node] = other.lineno
    ends: dict[cst.CSTNode, int] = {}
    at = 0
    for top in module.body:
        # A line of simple statements is as many statements to Python.
        at += len(top.body) if type(top) is cst.SimpleStatementLine else 1
        end = body[at - 1].end_lineno if at <= len(body) else None
        if end is None:
            return None
        ends[top] = end
    return starts, ends


def _flat_ast(stmt: ast.stmt, out: list[ast.stmt]) -> None:
    out.append(stmt)
    for name in stmt._fields:
        value = getattr(stmt, name)
        if not isinstance(value, list):
            continue
        for item in value:
            if isinstance(item, ast.stmt):
                _flat_ast(item, out)
            elif isinstance(item, (ast.ExceptHandler, ast.match_case)):
                for inner in item.body:
                    _flat_ast(inner, out)


def _flat_cst(stmt: cst.CSTNode, out: list[cst.CSTNode | None]) -> None:
    """The statements of ``stmt`` in source order; a line of simple
    statements is itself then None for each further statement on it."""
    if type(stmt) is cst.SimpleStatementLine:
        out.append(stmt)
        out.extend([None] * (len(stmt.body) - 1))
        return
    out.append(stmt)
    for name in _BLOCKS:
        value = getattr(stmt, name, None)
        if value is None:
            continue
        for part in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(part, cst.BaseCompoundStatement):  # ``elif``
                _flat_cst(part, out)
            else:
                _flat_suite(part if isinstance(part, cst.BaseSuite) else part.body, out)


def _flat_suite(suite: cst.BaseSuite, out: list[cst.CSTNode | None]) -> None:
    if type(suite) is cst.SimpleStatementSuite:
        out.extend([None] * len(suite.body))
        return
    for stmt in suite.body:
        _flat_cst(stmt, out)
