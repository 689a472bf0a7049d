"""Where a syntax error is: CPython's own ``SyntaxError`` for text the
parser rejects, so LL900 points where running the code would."""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

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
