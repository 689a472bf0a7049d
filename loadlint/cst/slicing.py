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
import contextlib
import functools
import keyword
import re
import sys
import threading
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

from loadlint.cst import gate, literals
from loadlint.cst.constructors import CHECKS, Constructors, constructors, install
from loadlint.sources.source import LINE_BREAK

if TYPE_CHECKING:
    import libcst

#: Python tokens, coarsely: strings (whole, multi-line ones included, an
#: unterminated one to the end of its line or of the text), comments,
#: numbers, names, brackets, separators, continuations, line breaks, operators.
_QUOTED = r"""(?:'''(?:[^'\\]|\\[\s\S]?|'(?!''))*(?:'''|\Z)
          |\"\"\"(?:[^"\\]|\\[\s\S]?|"(?!""))*(?:\"\"\"|\Z)
          |'(?:[^'\\\r\n]|\\(?:\r\n|[\s\S])?)*'?
          |"(?:[^"\\\r\n]|\\(?:\r\n|[\s\S])?)*"?)"""
_COMMENT = r"""
    |(?P<comment>\#[^\r\n]*)"""
_BREAKS = r"""
    |(?P<open>[(\[{])
    |(?P<close>[)\]}])
    |(?P<cont>\\(?:\r\n|\r|\n)?)
    |(?P<newline>\r\n|\r|\n)
"""
#: Python tokens, coarsely: strings (whole, multi-line ones included, an
#: unterminated one to the end of its line or of the text), comments,
#: numbers, names, brackets, separators, continuations, line breaks, operators.
TOKENS = re.compile(
    r"(?P<string>(?:(?<!\w)[rRbBuUfFtT]{1,2})?" + _QUOTED + ")" + _COMMENT
    + r"""
    |(?P<number>\d(?:[\w.]|(?<=[eE])[-+])*)
    |(?P<name>[^\W\d]\w*)
    |(?P<sep>[,;])"""
    + _BREAKS
    + r"""
    |(?P<op>\*\*=?|//=?|<<=?|>>=?|->|[-+*/%@&|^~<>:=!]=?|\.)
    """,
    re.VERBOSE,
)
#: What delimits statements: strings (their prefix is left to the name
#: before them), comments, brackets, line breaks; ``end`` (empty) at the end
#: of the text.  Each match first takes the plain text before its token in
#: one character class (``match.start(match.lastgroup)`` is where the token
#: starts): trying every alternative at every character was three times
#: slower.  The lookahead makes that run atomic, and every character it
#: stops at starts a token, so no text is scanned twice.
STRUCTURE = re.compile(
    r"""(?=(?P<plain>[^'"\#()\[\]{}\\\r\n]*))(?P=plain)(?:(?P<string>""" + _QUOTED + ")" + _COMMENT + _BREAKS
    + r"|(?P<end>\Z))",
    re.VERBOSE,
)


@functools.lru_cache(maxsize=1)
def logical_lines(text: str) -> list[tuple[int, int]]:
    """(begin, end) of each logical line of ``text``: what lies between line
    breaks outside brackets, strings and continuations (blank and comment
    lines included); ``end`` is past the line break.  The last text's are
    kept: the nesting guard and statement positions both need them."""
    lines = []
    depth = begin = 0
    for match in STRUCTURE.finditer(text):
        kind = match.lastgroup
        if kind == "open":
            depth += 1
        elif kind == "close":
            depth -= depth > 0
        elif kind == "newline" and depth == 0:
            end = match.end()
            lines.append((begin, end))
            begin = end
    if begin < len(text):
        lines.append((begin, len(text)))
    return lines


_PREFIXES = frozenset(a + b for a in "rRbBuUfFtT" for b in ["", *"rRbBuUfFtT"])
_NAME = re.compile(r"[^\W\d]\w*")
#: At bracket depth 0, outside strings: an assignment (``=``, ``+=``...).
_ASSIGNS = re.compile(r"(?<![=!<>:])=(?!=)")
_DEFINITION = re.compile(r"(?:async[ \t]+)?(?:def|class)\b|@")
#: Words that continue the compound statement above them at column 0.
_CONTINUATION = re.compile(r"(?:else|elif|except|finally)\b")

#: Modules at most this long (in characters) are parsed whole.
SLICE_ABOVE = 200_000
#: The most characters of kept statements handed to the parser.
MAX_PARSE = 1_000_000
#: Dropped statements are syntax-checked in batches of about this many
#: characters; a longer statement is checked alone, its literal data first
#: shrunk (``literals``): compiling builds a syntax tree of a few hundred
#: bytes a character.  One still over ``_CHECK_ALONE`` after that is not
#: compiled at all: it is kept, as a statement the parser rejects is.
_CHECK_BATCH = 64_000
#: The longest shrunk statement compiled (under 200 MB at its peak).
_CHECK_ALONE = 256_000

_KEYWORDS = frozenset(keyword.kwlist)
_BUILTINS = frozenset(dir(builtins))


@dataclass
class Slice:
    """The kept statements of a module, with their original rows."""

    text: str
    #: ``rows[i]`` is the original 1-based row of the slice's line ``i + 1``.
    rows: list[int]
    #: Characters of the original module and of the kept statements.
    size: int
    kept: int
    #: The original module, where its top-level statements start (the first
    #: bound ends the header, the last is its end), which of them are kept.
    source: str = field(default="", repr=False)
    bounds: list[int] = field(default_factory=list, repr=False)
    keep: list[bool] = field(default_factory=list, repr=False)

    @property
    def too_large(self) -> bool:
        """Whether the kept statements are beyond what is parsed."""
        return self.kept > MAX_PARSE

    def row(self, row: int) -> int:
        """The original row of the slice's line ``row``."""
        if row > len(self.rows):  # the end of the text
            return (self.rows[-1] if self.rows else 0) + row - len(self.rows)
        return self.rows[max(row, 1) - 1]

    def blanked(self, longer_than: int | None = None) -> str:
        """The original module with the dropped statements' lines left empty
        (those over ``longer_than`` characters kept too): parsed or scanned,
        it reports a position at its original row and column."""
        source, bounds = self.source, self.bounds
        pieces = [source[: bounds[0]]]
        for index, kept in enumerate(self.keep):
            begin, end = bounds[index], bounds[index + 1]
            if kept or longer_than is not None and end - begin > longer_than:
                pieces.append(source[begin:end])
            else:
                pieces.extend(LINE_BREAK.findall(source, begin, end))
        return "".join(pieces)


def parse(text: str, piece: Slice | None) -> tuple[libcst.Module, Slice | None]:
    """The module to analyse and the slice it holds (None: all of ``text``).

    A syntax error in the kept statements is raised as a parse of the whole
    module (dropped lines left empty) raises it, at its original position.
    """
    import libcst as cst

    if piece is None:
        return parse_module(text), None
    try:
        return parse_module(piece.text), piece
    except cst.ParserSyntaxError:
        return parse_module(piece.blanked()), None


_lock = threading.Lock()
#: How many ``fast_nodes`` scopes are open, in all threads.
_scopes = 0
#: Whether the hook (and the constructors, once made) are in place.
_installed = False
#: libcst's check (``CSTNode.__post_init__``), while ``_check_hook`` replaces it.
_checked: Any = None
_Name: Any = None
_fast: Constructors | None = None
#: Characters a process parses before the fast constructors pay for the
#: compile that makes them (about 30 ms: a tenth of a 100 KB parse).
PREPARE_AFTER = 100_000
_parsed = 0


def prepare() -> None:
    """Make the fast constructors, once per process (forked workers then
    share them); they are in place only inside ``fast_nodes``."""
    global _fast
    if not gate.fast():
        return
    import libcst as cst

    with _lock:  # one set, made once, whichever thread parses first
        if _fast is None:
            _fast = constructors(cst)
            if _installed:
                install(_fast, True)


@contextlib.contextmanager
def fast_nodes() -> Iterator[None]:
    """libcst's node classes with loadlint's constructors and check hook
    meanwhile, and as they were after: a caller of loadlint (the API, a
    flake8 process) finds libcst as it left it.  A run opens one scope for
    all its parses (swapping at each parse cost a tenth of a run); scopes
    nest, in any thread.  Plain libcst (``gate``): nothing is replaced.

    Opened before libcst is imported (a run whose files all come from the
    cache never imports it: a tenth of a second), the scope waits for the
    first parse, whose own scope puts the hook in place for the rest of it."""
    global _scopes
    lazy = "libcst" not in sys.modules
    if gate.plain_asked() if lazy else not gate.fast():
        yield
        return
    with _lock:
        if not lazy and not _installed:
            _install(True)
        _scopes += 1
    try:
        yield
    finally:
        with _lock:
            _scopes -= 1
            if _scopes == 0 and _installed:
                _install(False)


def _install(fast: bool) -> None:
    """The hook and the constructors in place (``fast``), or libcst's; under ``_lock``."""
    global _installed, _checked, _Name
    import libcst as cst

    if fast:
        _checked, _Name = vars(cst.CSTNode)["__post_init__"], cst.Name
        cst.CSTNode.__post_init__ = _check_hook  # type: ignore[method-assign,assignment]
    else:
        cst.CSTNode.__post_init__ = _checked  # type: ignore[method-assign]
    if _fast is not None:
        install(_fast, fast)
    _installed = fast


def parse_module(text: str, config: libcst.PartialParserConfig | None = None) -> libcst.Module:
    """``libcst.parse_module`` without checking each node the parser builds.

    Every node's constructor validates it (whitespace where a keyword needs
    it, balanced parentheses...): a sixth of the parse, and libcst notes it
    is wasted on parser output.  Names in a text that is not all ASCII are
    still checked: the parser's Unicode tables may accept an identifier this
    Python rejects (LL900).  Once a process has parsed ``PREPARE_AFTER``
    characters the nodes are built by ``loadlint.cst.constructors``.  Plain
    libcst (``gate``): ``libcst.parse_module`` itself."""
    import libcst as cst

    if not gate.fast():
        return cst.parse_module(text) if config is None else cst.parse_module(text, config=config)
    global _parsed
    _parsed += len(text)
    if _fast is None and _parsed > PREPARE_AFTER:
        prepare()
    with parser_nodes(check_names=not text.isascii()):
        return cst.parse_module(text) if config is None else cst.parse_module(text, config=config)


@contextlib.contextmanager
def parser_nodes(check_names: bool) -> Iterator[None]:
    """Nodes this thread builds meanwhile go unchecked, names excepted when
    ``check_names``; other threads' nodes are checked as libcst checks them
    (the flags are per thread).  Ours are built only by fixes, outside a
    parse."""
    with fast_nodes():
        nodes, names = CHECKS.nodes, CHECKS.names
        # A parse nested in another: never check less than the outer one needs.
        CHECKS.nodes, CHECKS.names = False, check_names or (not nodes and names)
        try:
            yield
        finally:
            CHECKS.nodes, CHECKS.names = nodes, names


def _check_hook(node: libcst.CSTNode) -> None:
    """``CSTNode.__post_init__`` inside ``fast_nodes``: libcst's check,
    unless this thread is parsing."""
    state = CHECKS
    if state.nodes or (state.names and type(node) is _Name):
        _checked(node)


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
        return Slice("", [], len(text), size, text, bounds, keep)
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
    return Slice("".join(pieces), rows, len(text), size, text, bounds, keep)


def _kept_size(bounds: list[int], keep: list[bool]) -> int:
    return bounds[0] + sum(bounds[i + 1] - bounds[i] for i, k in enumerate(keep) if k)


def _scan(text: str, union: _Names) -> list[_Statement]:
    """The top-level statements of ``text``: a line at column 0 outside
    brackets, strings and continuations starts one (``else:`` and the like
    continue the statement above).  Each is classified as it is scanned:
    names (outside strings and comments) are joined in ``union``; an ``=``
    or ``;`` at bracket depth 0 marks an assignment or several statements."""
    statements: list[_Statement] = []
    depth = 0
    begin = gap = 0  # the statement's start; where names are not yet collected
    names: set[str] = set()
    assignment = semicolon = False
    size = len(text)
    used: set[str] = set()

    def finish(end: int) -> None:
        names.update(_NAME.findall(text, gap, end))
        statement = _Statement(begin)
        definition = _DEFINITION.match(text, begin) is not None
        # A seed mentions DataLoader, or is neither a plain assignment nor a
        # definition (a call, a loop, an import, a main guard...).
        statement.seed = text.find("DataLoader", begin, end) >= 0 or semicolon or not (definition or assignment)
        names.difference_update(_KEYWORDS)
        found = names & _BUILTINS
        if found:
            statement.builtins = frozenset(found)
            used.update(found)
            names.difference_update(found)
        if names:
            statement.name = anchor = names.pop()
            for name in names:
                union.union(anchor, name)
        statements.append(statement)

    header = not text or text[0] in " \t\f\r\n#\\"
    decorating = text[:1] == "@"
    for match in STRUCTURE.finditer(text):
        kind = match.lastgroup
        if kind is None or kind == "end":
            break
        start = match.start(kind)
        if kind == "newline":
            end = match.end()
            if depth or end >= size or text[end] in " \t\f\r\n#\\" or _CONTINUATION.match(text, end):
                continue
            if decorating:
                # Decorators and what they decorate are one statement.
                decorating = text[end] == "@"
                continue
            if header:
                header = False
            else:
                assignment = assignment or _ASSIGNS.search(text, gap, end) is not None
                semicolon = semicolon or text.find(";", gap, end) >= 0
                finish(end)
            begin = gap = end
            names = set()
            assignment = semicolon = False
            decorating = text[end] == "@"
        elif kind == "open":
            if depth == 0:
                assignment = assignment or _ASSIGNS.search(text, gap, start) is not None
                semicolon = semicolon or text.find(";", gap, start) >= 0
            depth += 1
        elif kind == "close":
            if depth:
                depth -= 1
                if depth == 0:
                    names.update(_NAME.findall(text, gap, match.end()))
                    gap = match.end()
        elif kind != "cont":  # a string or a comment
            found = _NAME.findall(text, gap, start)
            if found and found[-1] in _PREFIXES and text.endswith(found[-1], gap, start):
                found.pop()  # the string's prefix
            names.update(found)
            if depth == 0:
                assignment = assignment or _ASSIGNS.search(text, gap, start) is not None
                semicolon = semicolon or text.find(";", gap, start) >= 0
            gap = match.end()
    if not header:
        if depth == 0:
            assignment = assignment or _ASSIGNS.search(text, gap, size) is not None
            semicolon = semicolon or text.find(";", gap, size) >= 0
        finish(size)
    rebound = _rebound(text, used) if used else set()
    for statement in statements:
        statement.builtins &= rebound
    return statements


def _rebound(text: str, builtins_used: set[str]) -> set[str]:
    """The builtins among ``builtins_used`` that ``text`` may bind (an
    assignment, a parameter, an import, a definition; strings included)."""
    alternatives = "|".join(sorted(builtins_used))
    binding = re.compile(
        rf"(?<![.\w])({alternatives})(?=[ \t]*(?:=(?!=)|:|,|\)))|\b(?:def|class|as|import|for|global|nonlocal)[ \t]+({alternatives})\b"
    )
    return {a or b for a, b in binding.findall(text)}


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
        if bounds[index + 1] - bounds[index] > _CHECK_BATCH:
            if _first_invalid(text, bounds, batch, keep):
                return
            batch, size = [], 0
            if not _parses(literals.reduce(text[bounds[index] : bounds[index + 1]]), _CHECK_ALONE):
                keep[index : index + 2] = [True] * len(keep[index : index + 2])
                return
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


def _parses(source: str, longest: int | None = None) -> bool:
    """Whether Python parses ``source``; False, without trying, when it is
    longer than ``longest``."""
    if longest is not None and len(source) > longest:
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes and the like: not ours to report
        # Compiling to bytecode is the faster check (no syntax tree objects);
        # what it rejects beyond syntax (``return`` outside a function...)
        # is told apart by the parser alone.
        for flags in (0, ast.PyCF_ONLY_AST):
            try:
                compile(source, "<slice>", "exec", flags, dont_inherit=True)
            except (SyntaxError, ValueError, UnicodeEncodeError, RecursionError, MemoryError):
                continue
            return True
    return False
