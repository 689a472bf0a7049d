"""Large modules: parse only the top-level statements that can matter.

libcst's parser costs about ten seconds a megabyte, so a big generated
module (a table of constants, an exported graph) would dominate a run.  A
module above ``SLICE_ABOVE`` characters is cut into its top-level statements
with a token scan (no parse), and only these are kept:

* seeds: statements mentioning ``DataLoader``, imports, main guards and other
  module-level compound statements (loops, ``with``, ``try``, ``if``),
  expression statements (calls) and anything else that is neither a plain
  assignment nor a definition;
* every statement sharing a name with a kept one, transitively (definitions
  a kept statement uses, assignments and calls that use a kept name).
  Builtins link statements only when the module binds them somewhere;
* any statement Python's own parser rejects, so that a syntax error is
  reported exactly where a full parse reports it.

The kept statements are parsed as one module; ``rows`` maps its lines back
to the original rows (columns are unchanged: statements are whole lines).
A dropped statement shares no name with a kept one, so no fact a rule reads
can depend on it.  When the kept statements still exceed ``MAX_PARSE``
characters the module is reported as too large (LL900) instead.
"""

from __future__ import annotations

import ast
import builtins
import keyword
import re
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from loadlint.source import LINE_BREAK

if TYPE_CHECKING:
    import libcst

#: Python tokens, coarsely: strings (whole, multi-line ones included, an
#: unterminated one to the end of its line or of the text), comments,
#: numbers, names, brackets, separators, continuations, line breaks, operators.
TOKENS = re.compile(
    r"""
    (?P<string>(?:(?<!\w)[rRbBuUfFtT]{1,2})?
        (?:'''(?:[^'\\]|\\[\s\S]?|'(?!''))*(?:'''|\Z)
          |\"\"\"(?:[^"\\]|\\[\s\S]?|"(?!""))*(?:\"\"\"|\Z)
          |'(?:[^'\\\r\n]|\\(?:\r\n|[\s\S])?)*'?
          |"(?:[^"\\\r\n]|\\(?:\r\n|[\s\S])?)*"?))
    |(?P<comment>\#[^\r\n]*)
    |(?P<number>\d(?:[\w.]|(?<=[eE])[-+])*)
    |(?P<name>[^\W\d]\w*)
    |(?P<open>[(\[{])
    |(?P<close>[)\]}])
    |(?P<sep>[,;])
    |(?P<cont>\\(?:\r\n|\r|\n))
    |(?P<newline>\r\n|\r|\n)
    |(?P<op>\*\*=?|//=?|<<=?|>>=?|->|[-+*/%@&|^~<>:=!]=?|\.)
    """,
    re.VERBOSE,
)

#: Modules at most this long (in characters) are parsed whole.
SLICE_ABOVE = 200_000
#: The most characters of kept statements handed to the parser.
MAX_PARSE = 1_000_000
#: Dropped statements are syntax-checked in batches of about this many characters.
_CHECK_BATCH = 256_000

_KEYWORDS = frozenset(keyword.kwlist)
_BUILTINS = frozenset(dir(builtins))
#: Words that continue the compound statement above them at column 0.
_CONTINUATIONS = frozenset({"else", "elif", "except", "finally"})
_DEFINITIONS = frozenset({"def", "class", "@"})
_NOT_ASSIGNMENT = frozenset({"==", "!=", "<=", ">=", "->"})
#: After a builtin's name, what makes the occurrence a (possible) binding.
_BINDS_AFTER = re.compile(r"[ \t]*(?:=(?!=)|:|,|\))")
_BINDS_BEFORE = frozenset({"def", "class", "as", "import", "for", "global", "nonlocal"})


@dataclass
class Slice:
    """The kept statements of a module, with their original rows."""

    text: str
    #: ``rows[i]`` is the original 1-based row of the slice's line ``i + 1``.
    rows: list[int]
    #: Characters of the original module and of the kept statements.
    size: int
    kept: int
    #: The original module and the (start, end) offsets of the kept parts.
    source: str = field(default="", repr=False)
    segments: list[tuple[int, int]] = field(default_factory=list, repr=False)

    @property
    def too_large(self) -> bool:
        """Whether the kept statements are beyond what is parsed."""
        return self.kept > MAX_PARSE

    def row(self, row: int) -> int:
        """The original row of the slice's line ``row``."""
        if row > len(self.rows):  # the end of the text
            return (self.rows[-1] if self.rows else 0) + row - len(self.rows)
        return self.rows[max(row, 1) - 1]

    def blanked(self) -> str:
        """The original module with the dropped statements' lines left empty:
        parsed, it reports a syntax error at its original row and column."""
        pieces: list[str] = []
        previous = 0
        for begin, end in self.segments:
            pieces.extend(LINE_BREAK.findall(self.source, previous, begin))
            pieces.append(self.source[begin:end])
            previous = end
        pieces.extend(LINE_BREAK.findall(self.source, previous))
        return "".join(pieces)


def parse(text: str, piece: Slice | None) -> tuple[libcst.Module, list[int] | None]:
    """The module to analyse and the original rows of its lines (None: its own).

    A syntax error in the kept statements is raised as a parse of the whole
    module (dropped lines left empty) raises it, at its original position.
    """
    import libcst as cst

    if piece is None:
        return cst.parse_module(text), None
    try:
        return cst.parse_module(piece.text), piece.rows
    except cst.ParserSyntaxError:
        return cst.parse_module(piece.blanked()), None


class _Names:
    """Union-find over names: statements sharing a name end up together."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, name: str) -> str:
        parent = self.parent
        root = parent.setdefault(name, name)
        while parent[root] != root:
            root = parent[root]
        while parent[name] != root:
            parent[name], name = root, parent[name]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


#: The union-find node every seed statement joins.
_SEED = "\x00seed"


@dataclass
class _Statement:
    start: int
    #: One of the statement's names (the scan joins all of them), or None.
    name: str | None = None
    builtins: frozenset[str] = frozenset()
    seed: bool = False


def slice_module(text: str) -> Slice:
    """The statements of ``text`` that can matter (see the module docstring)."""
    union = _Names()
    statements = _scan(text, union)
    keep = _link(statements, union)
    bounds = [s.start for s in statements] + [len(text)]
    if _kept_size(bounds, keep) <= MAX_PARSE:
        _keep_invalid(text, bounds, keep)
    size = _kept_size(bounds, keep)
    if size > MAX_PARSE:
        return Slice("", [], len(text), size)
    # The header (comments and blank lines before the first statement) is kept.
    segments = [(0, bounds[0])] + [(bounds[i], bounds[i + 1]) for i, k in enumerate(keep) if k]
    pieces: list[str] = []
    rows: list[int] = []
    row, previous = 1, 0
    for begin, end in segments:
        row += len(LINE_BREAK.findall(text, previous, begin))
        piece = text[begin:end]
        lines = len(LINE_BREAK.findall(piece))
        if piece and not (piece.endswith("\n") or piece.endswith("\r")):
            lines += 1  # the last line, without a line break
        pieces.append(piece)
        rows.extend(range(row, row + lines))
        row, previous = row + lines, end
    return Slice("".join(pieces), rows, len(text), size, text, segments)


def _kept_size(bounds: list[int], keep: list[bool]) -> int:
    return bounds[0] + sum(bounds[i + 1] - bounds[i] for i, k in enumerate(keep) if k)


def _scan(text: str, union: _Names) -> list[_Statement]:
    """The top-level statements of ``text``: a line at column 0 outside
    brackets, strings and continuations starts one (``else:`` and the like
    continue the statement above).  Each is classified as it is scanned and
    its names are joined in ``union``."""
    statements: list[_Statement] = []
    current: _Statement | None = None
    names: set[str] = set()
    used_builtins: set[str] = set()
    rebound: set[str] = set()
    depth = 0
    logical_end = True  # a line break at depth 0 came last: a statement may start
    first = second = previous = ""
    assignment = False

    def finish() -> None:
        if current is None:
            return
        current.builtins = frozenset(used_builtins)
        if not current.seed:
            # Neither a plain assignment nor a definition: a call, a loop, an import...
            kind = "def" if first == "async" and second == "def" else first
            current.seed = kind not in _DEFINITIONS and not assignment
        if names:
            current.name = anchor = names.pop()
            for name in names:
                union.union(anchor, name)

    for match in TOKENS.finditer(text):
        kind = match.lastgroup
        if kind == "comment" or kind == "cont":
            continue
        if kind == "newline":
            logical_end = logical_end or depth == 0
            continue
        start, value = match.start(), match.group()
        if logical_end and (start == 0 or text[start - 1] in "\r\n") and value not in _CONTINUATIONS or current is None:
            # (an indented first statement is an error the parser reports)
            finish()
            current = _Statement(start)
            statements.append(current)
            names, used_builtins = set(), set()
            first, second, previous, assignment, depth = value, "", "", False, 0
        elif not second:
            second = value
        logical_end = False
        if kind == "name":
            if "DataLoader" in value:
                current.seed = True
            if value in _BUILTINS:
                used_builtins.add(value)
                if previous != "." and (previous in _BINDS_BEFORE or _BINDS_AFTER.match(text, match.end())):
                    rebound.add(value)
            elif value not in _KEYWORDS:
                names.add(value)
        elif kind == "open":
            depth += 1
        elif kind == "close":
            depth = max(depth - 1, 0)
        elif depth == 0 and kind == "op" and value.endswith("=") and value not in _NOT_ASSIGNMENT:
            assignment = True
        elif depth == 0 and value == ";":
            current.seed = True
        previous = value
    finish()
    for statement in statements:
        statement.builtins &= rebound
    return statements


def _link(statements: list[_Statement], union: _Names) -> list[bool]:
    """Which statements are seeds or share a name, transitively, with one."""
    for statement in statements:
        anchor = _SEED if statement.seed else statement.name
        for name in (statement.name, *statement.builtins):
            if name is not None:
                anchor = anchor or name
                union.union(anchor, name)
    seed = union.find(_SEED)
    return [s.seed or any(n is not None and union.find(n) == seed for n in (s.name, *s.builtins)) for s in statements]


def _keep_invalid(text: str, bounds: list[int], keep: list[bool]) -> None:
    """Keep the first dropped statement Python's parser rejects (if any), so
    that the parse reports the same first error a full parse would."""
    batch: list[int] = []
    size = 0
    for index, kept in enumerate(keep):
        if kept:
            continue
        batch.append(index)
        size += bounds[index + 1] - bounds[index]
        if size >= _CHECK_BATCH:
            if _first_invalid(text, bounds, batch, keep):
                return
            batch, size = [], 0
    _first_invalid(text, bounds, batch, keep)


def _first_invalid(text: str, bounds: list[int], indices: list[int], keep: list[bool]) -> bool:
    """Mark the first of ``indices`` that does not parse as kept; whether one did not."""
    if not indices or _parses("".join(text[bounds[i] : bounds[i + 1]] for i in indices)):
        return False
    if len(indices) == 1:
        # The statement after it too: libcst places an error by what follows.
        keep[indices[0] : indices[0] + 2] = [True] * len(keep[indices[0] : indices[0] + 2])
        return True
    half = len(indices) // 2
    return _first_invalid(text, bounds, indices[:half], keep) or _first_invalid(text, bounds, indices[half:], keep)


def _parses(source: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes and the like: not ours to report
        try:
            compile(source, "<slice>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        except (SyntaxError, ValueError, UnicodeEncodeError, RecursionError, MemoryError):
            return False
    return True
