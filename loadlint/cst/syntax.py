"""Where a syntax error is: CPython's own ``SyntaxError`` for text the
parser rejects, so LL900 points where running the code would."""

from __future__ import annotations

import ast
import re
import warnings
from typing import TYPE_CHECKING

from loadlint.cst.slicing import TOKENS, logical_lines
from loadlint.sources.source import position_of_offset

if TYPE_CHECKING:
    import libcst


def interpreter_error(text: str, *, top_level_await: bool = False) -> SyntaxError | None:
    """The ``SyntaxError`` CPython raises for the text; None when it compiles
    (or fails for another reason, such as a NUL byte on an older Python)."""
    flags = ast.PyCF_ONLY_AST | (ast.PyCF_ALLOW_TOP_LEVEL_AWAIT if top_level_await else 0)
    try:
        compile(text, "<unknown>", "exec", flags, dont_inherit=True)
    except SyntaxError as exc:
        return exc
    except (ValueError, MemoryError, RecursionError, OverflowError, UnicodeError):
        return None
    return None


def syntax_error(text: str, exc: libcst.ParserSyntaxError, python: SyntaxError | None) -> tuple[str, int, int]:
    """LL900's (message, row, column) for text libcst rejects: where the
    interpreter reports the error, as users see it when they run the code;
    libcst's own position only where the interpreter accepts the text
    (syntax newer than libcst knows)."""
    if python is None:
        message = str(exc.message).strip().splitlines()[0] if exc.message else "invalid syntax"
        return f"SyntaxError: {message}", exc.raw_line, exc.raw_column + 1
    lines = re.split(r"\r\n|\r|\n", text)
    row = min(max(python.lineno or 1, 1), len(lines))
    column = min(max(python.offset or 1, 1), len(lines[row - 1]) + 1)
    return f"SyntaxError: {python.msg or 'invalid syntax'}", row, column


#: Nesting beyond this (see ``nesting_depth``) is reported as too complex
#: instead of being handed to a recursive parser and visitor: libcst's native
#: parser slows down superlinearly with depth and overflows its stack (a hard
#: crash, not a RecursionError) at a few thousand levels.
MAX_NESTING = 200

_STATEMENT = re.compile(r"[ \t]*(?:def|class|import|return|pass|raise|with|while|try|except|finally|global|nonlocal|del|assert|break|continue|elif)\b")
#: Keywords that nest what follows them (or chain with what precedes them).
_NESTING_KEYWORDS = frozenset({"not", "lambda", "await", "if", "else", "and", "or", "in", "is", "yield", "for"})


def nesting_depth(text: str) -> int:
    """An upper estimate of the syntax tree's depth (see ``_nesting``)."""
    return _nesting(text)[0]


def _nesting(text: str, limit: int = MAX_NESTING, begin: int = 0, end: int | None = None) -> tuple[int, int]:
    """An upper estimate of the syntax tree's depth, from tokens alone.

    Brackets nest, and so do operator chains within one bracket level
    (``a.b.c``, ``f()()``, ``-~-x``, ``not not x``, ``lambda: lambda: x``,
    adjacent strings, ``1 + 1 + ...``: libcst builds one node per link), so
    each bracket level contributes its open chain, reset by a comma.  Strings
    and comments are skipped; an f-string adds its replacement-field depth.
    Returns the depth and the offset where it first exceeds ``limit`` (or
    where it is reached, when it stays within).
    """
    levels = [0]  # open chain length per bracket level, outermost first
    total = deepest = where = 0
    operand = False  # the previous token ends an operand: a bracket is a call or subscript
    for match in TOKENS.finditer(text, begin, len(text) if end is None else end):
        kind = match.lastgroup
        if kind == "comment" or kind == "cont":
            continue
        was_operand, operand = operand, kind in ("name", "number", "string", "close")
        if kind == "open":
            if was_operand:
                levels[-1] += 1
                total += 1
            levels.append(0)
            total += 1
        elif kind == "close":
            if len(levels) > 1:
                total -= levels.pop() + 1
            continue
        elif kind == "sep" or kind == "newline" and len(levels) == 1:
            total -= levels[-1]
            levels[-1] = 0
            continue
        elif kind == "newline" and _STATEMENT.match(text, match.end()):
            # A statement cannot start inside brackets: one was left open.
            # The parser stops there, so what was open no longer nests.
            levels = [0]
            total = 0
            continue
        elif kind == "op" or kind == "name" and match.group() in _NESTING_KEYWORDS:
            levels[-1] += 1
            total += 1
        elif kind == "string":
            levels[-1] += 1
            total += 1
            token = match.group()
            quote = min(i for i in (token.find("'"), token.find('"')) if i >= 0)
            inner = total + _brace_depth(token) if "f" in token[:quote].lower() else 0
            if inner > deepest:
                deepest, where = inner, (match.start() if deepest <= limit else where)
        else:
            continue
        if total > deepest:
            deepest, where = total, (match.start() if deepest <= limit else where)
    return deepest, where


def too_deep_at(text: str) -> tuple[int, int] | None:
    """(row, column) where nesting first exceeds ``MAX_NESTING``; None within it.

    The estimate starts afresh at every line break outside brackets, and a
    logical line nests no deeper than it has characters: a token adds at
    most its length (an opening bracket after an operand adds two, and the
    operand, a name or string of one character at least or a closing bracket
    that took one off, pays for one), and no deeper than the brackets,
    operators, quotes and keywords it holds allow (``nesting_bound``).  Only
    the lines beyond ``MAX_NESTING`` by both are scanned token by token
    (brackets, strings and line breaks alone are found several times faster
    than every token)."""
    for begin, end in logical_lines(text):
        if end - begin > MAX_NESTING and nesting_bound(text, begin, end) > MAX_NESTING:
            found = _too_deep_in(text, begin, end)
            if found is not None:
                return found
    return None


#: Characters that may raise the estimate (``_nesting``): each token that
#: does holds one of these, or is a keyword (``_KEYWORD``).
_RAISING = "([{" + "([{" + ".+-*/%@&|^~<>:=!" + "'\""
_KEYWORD = re.compile(r"\b(?:" + "|".join(sorted(_NESTING_KEYWORDS)) + r")\b")


def nesting_bound(text: str, begin: int, end: int) -> int:
    """An upper bound of the estimate over ``text[begin:end]`` (or a count
    already past ``MAX_NESTING``, where counting stops), counted in C:
    brackets twice (after an operand a bracket adds two; a brace in an
    f-string adds one), operator characters, quotes and keywords once,
    inside strings too.  Most long lines (a call with many arguments) stay
    well below ``MAX_NESTING`` and need no token scan."""
    total = sum(text.count(ch, begin, end) for ch in _RAISING)
    return total + len(_KEYWORD.findall(text, begin, end)) if total <= MAX_NESTING else total


def _too_deep_in(text: str, begin: int, end: int) -> tuple[int, int] | None:
    depth, where = _nesting(text, MAX_NESTING, begin, end)
    return position_of_offset(text, where) if depth > MAX_NESTING else None


def _brace_depth(token: str) -> int:
    depth = deepest = 0
    for ch in token.replace("{{", "").replace("}}", ""):
        if ch == "{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == "}" and depth:
            depth -= 1
    return deepest


def compile_alone(text: str, chunks: list[str]) -> bool:
    """Whether each of ``chunks``, whole top-level statements of ``text``,
    compiles on its own as ``rows.python_tree`` compiles a text: Python's
    grammar (no more: no symbol table), which judges each statement alone,
    unless a ``__future__`` import changes it (``barry_as_FLUFL``)."""
    if "__future__" in text:
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # as ``rows.python_tree``
        for chunk in chunks:
            try:
                compile(chunk, "<module>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
            except (SyntaxError, ValueError, MemoryError, RecursionError):
                return False
    return True
