"""IPython syntax in a notebook cell, masked so that the cell parses as Python.

Each line of magic (``%matplotlib``, ``!pip``, ``x = %env``), help (``obj?``) or
a cell magic's first line becomes a placeholder statement on the same line,
numbered across the notebook, so positions stay true and ``unmask`` puts the
original lines back after a fix.  A ``%%`` cell whose body is not Python
(``%%bash``, ``%%writefile``) is not masked but skipped.  A line magic that
runs a statement (``%time stmt``, ``%timeit -n 1 stmt``, ``%prun stmt``)
keeps the statement at its columns behind ``pass;`` padded to the magic's
length.  ``%run helpers.py`` reads as ``from helpers import *``.
"""

from __future__ import annotations

import ast
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
_PLACEHOLDER_LINE = re.compile(r"^[ \t]*(?:from [\w.]+ import \*; )?__loadlint_ipython_(\d+)__[ \t]*$", re.MULTILINE)
#: ``%run helpers.py`` (flags without values, then arguments) runs a module
#: of the notebook's folder and leaves its names in the notebook's: masked as
#: ``from helpers import *``, so project analysis follows its functions.
RUN_SCRIPT = r"%run(?:[ \t]+-[inet])*[ \t]+(?:\./)?((?:[A-Za-z_]\w*/)*[A-Za-z_]\w*)\.py"
_RUN = re.compile(RUN_SCRIPT + r"(?:[ \t].*)?$")
#: Line magics that run the rest of their line as a Python statement, with
#: the options that take a value; the statement is kept, so a call there
#: (``%time train(model, loader, device)``) is seen.
_STATEMENT_MAGICS: dict[str, frozenset[str] | None] = {
    "time": None,
    "timeit": frozenset("nrp"),
    "prun": frozenset("sldTD"),
}
#: What a kept statement's magic prefix becomes: same length, so positions stay true.
_KEPT = "pass;"
_KEPT_LINE = re.compile(r"^([ \t]*pass;[ ]*)(.*)$", re.MULTILINE)
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


def _statement_start(line: str) -> int | None:
    """Where the Python statement of ``%time stmt`` (``%timeit -n 1 stmt``,
    ``%prun -s cumulative stmt``) starts in ``line``, or None for any other
    line, a compound statement or one that does not parse alone."""
    body = line.rstrip("\r\n")
    stripped = body.lstrip(" \t")
    if not stripped.startswith("%") or stripped.startswith("%%") or body.rstrip().endswith("\\"):
        return None
    words = stripped[1:].split(" ")
    if words[0] not in _STATEMENT_MAGICS:
        return None
    takes = _STATEMENT_MAGICS[words[0]]
    at = len(body) - len(stripped) + 2 + len(words[0])  # past ``%name `` and its space
    rest = words[1:]
    while rest and rest[0] == "":
        at, rest = at + 1, rest[1:]
    # ``%time`` takes no options: ``%time -x`` times the expression ``-x``.
    while takes is not None and rest and rest[0].startswith("-") and len(rest[0]) > 1:
        option = rest[0]
        at, rest = at + len(option) + 1, rest[1:]
        if option[-1] in takes and len(option) == 2:  # ``-n 1``: the value is the next word
            if not rest:
                return None
            at, rest = at + len(rest[0]) + 1, rest[1:]
        while rest and rest[0] == "":
            at, rest = at + 1, rest[1:]
    statement = body[at:]
    if at - (len(body) - len(stripped)) < len(_KEPT) or not statement.strip():
        return None
    try:
        parsed = ast.parse(statement)
    except (SyntaxError, ValueError):
        return None
    if len(parsed.body) != 1 or isinstance(parsed.body[0], _COMPOUND):
        return None
    return at


_COMPOUND = (
    ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith,
    ast.Try, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Match,
)


def _is_magic(line: str) -> bool:
    stripped = line.lstrip(" \t")
    return stripped.startswith(("%", "!", "?")) or _MAGIC_ASSIGN.match(line) is not None


class Masker:
    """Numbers placeholders across the whole notebook so they are unique."""

    def __init__(self) -> None:
        self.originals: list[str] = []
        #: The magic prefixes of kept statements, in order: (masked, original).
        self.kept: list[tuple[str, str]] = []

    def placeholder(self, line: str, indent: str | None = None) -> str:
        body = line.rstrip("\r\n")
        ending = line[len(body):]
        if indent is None:
            indent = body[: len(body) - len(body.lstrip(" \t"))]
        self.originals.append(body)
        run = _RUN.match(body) if not indent and not body.rstrip().endswith("\\") else None
        star = f"from {run.group(1).replace('/', '.')} import *; " if run else ""
        return f"{indent}{star}{_PLACEHOLDER.format(len(self.originals) - 1)}{ending}"

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
        # A cell that writes ``pass;`` itself keeps no statement: unmask could not tell them apart.
        keep = _KEPT_LINE.search(source) is None
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
            start = _statement_start(line) if keep and at_start else None
            if start is not None:
                indent = line[: len(line) - len(line.lstrip(" \t"))]
                masked = indent + _KEPT.ljust(start - len(indent))
                self.kept.append((masked, line[:start]))
                out.append(masked + line[start:])
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

    def unmask(self, text: str, source: str | None = None) -> str:
        """``text`` (a masked cell, maybe edited) with its IPython lines
        back; ``source``: the cell as it was masked, whose kept magics are
        the ones to give back (masks of other cells may look the same)."""
        text = _PLACEHOLDER_LINE.sub(lambda m: self.originals[int(m.group(1))], text)
        kept = self.kept
        if source is not None:
            own = Masker()
            own.mask(source)
            kept = own.kept
        if not kept:
            return text
        # A cell's kept lines come back in their order (fixes move no line), each with its own prefix.
        used: set[int] = set()

        def restore(match: re.Match[str]) -> str:
            for index, (masked, original) in enumerate(kept):
                if index not in used and masked == match.group(1)[: len(masked)]:
                    used.add(index)
                    return original + match.group(0)[len(masked) :]
            return match.group(0)

        return _KEPT_LINE.sub(restore, text)
