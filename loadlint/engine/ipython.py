"""IPython syntax in a notebook cell, masked so that the cell parses as Python.

Each line of magic (``%time``, ``!pip``, ``x = %env``), help (``obj?``) or
a cell magic's first line becomes a placeholder statement on the same line,
numbered across the notebook, so positions stay true and ``unmask`` puts the
original lines back after a fix.  A ``%%`` cell whose body is not Python
(``%%bash``, ``%%writefile``) is not masked but skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from loadlint.sources.source import lines_with_breaks

#: Cell magics whose body is Python: the cell is checked without its first
#: line.  Any other ``%%`` cell (``%%bash``, ``%%writefile``, ``%%html``...)
#: is not Python and is skipped.
PYTHON_CELL_MAGICS = frozenset(
    {"time", "timeit", "capture", "prun", "debug", "python", "python3", "pypy", "memit", "mprun", "snakeviz"}
)

_PLACEHOLDER = "__loadlint_ipython_{}__"
_PLACEHOLDER_LINE = re.compile(r"^[ \t]*__loadlint_ipython_(\d+)__[ \t]*$", re.MULTILINE)
_MAGIC_ASSIGN = re.compile(r"[ \t]*[A-Za-z_][\w.]*(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*)*[ \t]*=[ \t]*[%!]")


@dataclass
class _LineState:
    quote: str | None = None  # the open string's quote (' " ''' or """)
    depth: int = 0
    continued: bool = False


def _scan(line: str, state: _LineState) -> bool:
    """Advance the tokenizer-ish state over one line; True when the line has
    a ``?`` outside strings and comments (IPython's help syntax: Python has
    no other use for it)."""
    question = False
    i, n = 0, len(line)
    body = line.rstrip("\r\n")
    n = len(body)
    while i < n:
        if state.quote is not None:
            if body[i] == "\\":
                i += 2
                continue
            if body.startswith(state.quote, i):
                i += len(state.quote)
                state.quote = None
                continue
            i += 1
            continue
        ch = body[i]
        if ch == "#":
            break
        if ch in "\"'":
            triple = ch * 3
            state.quote = triple if body.startswith(triple, i) else ch
            i += len(state.quote)
            continue
        if ch in "([{":
            state.depth += 1
        elif ch in ")]}":
            state.depth = max(0, state.depth - 1)
        elif ch == "?":
            question = True
        i += 1
    stripped = body.rstrip()
    state.continued = stripped.endswith("\\") and (state.quote is None or len(state.quote) == 3)
    if state.quote is not None and len(state.quote) == 1 and not state.continued:
        state.quote = None  # an unterminated string ends at the line (a syntax error anyway)
    return question


def _is_magic(line: str) -> bool:
    stripped = line.lstrip(" \t")
    return stripped.startswith(("%", "!", "?")) or _MAGIC_ASSIGN.match(line) is not None


class Masker:
    """Numbers placeholders across the whole notebook so they are unique."""

    def __init__(self) -> None:
        self.originals: list[str] = []

    def placeholder(self, line: str, indent: str | None = None) -> str:
        body = line.rstrip("\r\n")
        ending = line[len(body):]
        if indent is None:
            indent = body[: len(body) - len(body.lstrip(" \t"))]
        self.originals.append(body)
        return f"{indent}{_PLACEHOLDER.format(len(self.originals) - 1)}{ending}"

    def mask(self, source: str) -> str | None:
        """The cell's source as parsable Python, line for line; None for a
        cell that is not Python (a ``%%bash`` cell)."""
        lines = lines_with_breaks(source)
        out: list[str] = []
        first = next((i for i, line in enumerate(lines) if line.strip()), None)
        if first is not None and lines[first].lstrip().startswith("%%"):
            magic = lines[first].lstrip()[2:].split(None, 1)
            if not magic or magic[0] not in PYTHON_CELL_MAGICS:
                return None
        state = _LineState()
        in_magic = False
        magic_indent = ""
        for number, line in enumerate(lines):
            at_start = state.quote is None and state.depth == 0 and not state.continued
            if in_magic:
                # A backslash continues a magic; the next line is still the
                # magic's, whatever its indentation.
                out.append(self.placeholder(line, magic_indent))
                in_magic = line.rstrip("\r\n").rstrip().endswith("\\")
                continue
            if at_start and line.strip() and (_is_magic(line) or number == first and line.lstrip().startswith("%%")):
                magic_indent = line[: len(line) - len(line.lstrip(" \t"))]
                out.append(self.placeholder(line))
                in_magic = line.rstrip("\r\n").rstrip().endswith("\\")
                continue
            if state.quote is None and state.depth == 0 and not state.continued and line.strip():
                probe = _LineState()
                if _scan(line, probe) and probe.quote is None and probe.depth == 0:
                    out.append(self.placeholder(line))
                    continue
            _scan(line, state)
            out.append(line)
        return "".join(out)

    def unmask(self, text: str) -> str:
        return _PLACEHOLDER_LINE.sub(lambda m: self.originals[int(m.group(1))], text)
