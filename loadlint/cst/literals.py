"""A large statement shrunk for a syntax check, in linear time and memory.

Compiling a statement builds a syntax tree of a few hundred bytes a
character: a 15 MB ``TABLE = [1, 1, ...]`` took 5 GB.  ``reduce`` replaces
every bracketed group whose contents are literal data (numbers, plain
strings, ``True``/``False``/``None``, nested lists, tuples, sets and dicts of
them, positional call arguments and subscripts made of them) and valid as
such, by a small group of the same kind (``[0]``, ``(0,)``, ``{0: 0}``...).
Nothing else changes, so the reduced statement parses exactly when the
original does: a replaced group was valid, and its replacement behaves the
same wherever it stands (neither can be assigned to; a call or subscript
does not care what its arguments are).  Anything the checker does not
recognise (names, operators, escapes it cannot vouch for, odd nesting)
leaves its group as it is, for the compiler to judge.
"""

from __future__ import annotations

import ast
import functools
import re
import tokenize

#: Groups whose text is shorter than this are left as they are.
REPLACE_FROM = 32
#: Nesting beyond this is left to the compiler (Python refuses 200 levels).
_MAX_DEPTH = 150

_NUMBER = rf"(?:{tokenize.Number})(?![\w.])"
_WS = r"(?:[ \t\f\r\n]|\\(?:\r\n|\r|\n)|\#[^\r\n]*)*"
#: A plain string: no prefix but ``u``, no backslash, one line.
_PLAIN = r"""[uU]?(?:"[^"\\\r\n]*"|'[^'\\\r\n]*')"""
_ATOM = rf"(?:(?:[-+~]{_WS})*{_NUMBER}|{_PLAIN}(?:{_WS}{_PLAIN})*|(?:True|False|None)\b)"
#: Many plain elements at once, each followed by its comma: the fast path
#: through a data table (one match instead of a loop step per token).
#: The common case, about six times faster: decimal numbers and plain strings.
_FAST = r"""(?:-[ \t]*)?(?:(?:0+|[1-9]\d*)(?![\w.])|\d+(?:\.\d*(?:[eE][-+]?\d+)?|[eE][-+]?\d+)(?![\w.]))|"[^"\\\r\n]*"|'[^'\\\r\n]*'"""
_S = r"[ \t\r\n]*"
# Never empty: ``[] = x`` is valid, a group holding a literal never is.
_FAST_ITEMS = rf"(?:{_S}(?:{_FAST}){_S},){{0,64}}{_S}(?:{_FAST}){_S},?{_S}"
_FAST_PAIR = rf"{_S}(?:{_FAST}){_S}:{_S}(?:{_FAST})"
#: A small group of them (a table's row): ``[1, 2]``, ``(1,)``, ``{1: 'a'}``...
_FAST_GROUP = (
    rf"\[{_FAST_ITEMS}\]|\({_FAST_ITEMS}\)|\{{{_FAST_ITEMS}\}}|\{{(?:{_FAST_PAIR}{_S},){{0,64}}{_FAST_PAIR}{_S},?{_S}\}}"
)
_FAST_VALUE = rf"(?:{_FAST}|{_FAST_GROUP})"
_FAST_RUN = re.compile(rf"(?:{_S}{_FAST_VALUE}{_S},){{1,4096}}")
_FAST_PAIRS = re.compile(rf"(?:{_S}{_FAST_VALUE}{_S}:{_S}{_FAST_VALUE}{_S},){{1,4096}}")
_NUMBER_ONLY = re.compile(_NUMBER)
#: (Bounded: the regular expression engine keeps state for each repetition.)
_RUN = re.compile(rf"(?:{_WS}{_ATOM}{_WS},){{1,256}}")
_PAIRS = re.compile(rf"(?:{_WS}{_ATOM}{_WS}:{_WS}{_ATOM}{_WS},){{1,256}}")

_QUOTED = r"""(?:'''(?:[^'\\]|\\[\s\S]?|'(?!''))*(?:'''|\Z)
          |\"\"\"(?:[^"\\]|\\[\s\S]?|"(?!""))*(?:\"\"\"|\Z)
          |'(?:[^'\\\r\n]|\\(?:\r\n|[\s\S])?)*'?
          |"(?:[^"\\\r\n]|\\(?:\r\n|[\s\S])?)*"?)"""
#: One token at a time, where the runs do not apply.
_TOKEN = re.compile(
    r"(?P<ws>(?:[ \t\f\r\n]|\\(?:\r\n|\r|\n)|\#[^\r\n]*)+)"
    r"|(?P<string>(?<![\w])[A-Za-z]{0,2}" + _QUOTED + ")"
    r"|(?P<number>\.?\d(?:[\w.]|(?<=[eE])[-+])*)"
    r"|(?P<name>[^\W\d]\w*)"
    r"|(?P<open>[(\[{])|(?P<close>[)\]}])|(?P<comma>,)|(?P<colon>:(?!=))|(?P<unary>[-+~])",
    re.VERBOSE,
)
#: Outside a checked group: straight to the next bracket, string or comment.
_SKIP = re.compile(
    r"""(?=(?P<plain>[^'"\#()\[\]{}]*))(?P=plain)(?:(?P<string>""" + _QUOTED
    + r""")|(?P<comment>\#[^\r\n]*)|(?P<open>[(\[{])|(?P<close>[)\]}])|(?P<end>\Z))""",
    re.VERBOSE,
)
_CLOSE = {"(": ")", "[": "]", "{": "}"}
#: What the compiler refuses anywhere, comments included: left to it whole.
_REFUSED = re.compile("[\x00\ud800-\udfff]")
#: After a unary operator: the operand starts.
_OPERAND = re.compile(_WS + r"[-+~\w.'\"(\[{]")
_LITERAL_NAMES = frozenset({"True", "False", "None"})

# Element states inside a group.
_START, _KEY, _COLON, _VALUE = range(4)


class _Group:
    __slots__ = ("open", "start", "applied", "pure", "state", "comma", "dict", "string", "found")

    def __init__(self, open_: str, start: int, applied: bool, pure: bool) -> None:
        self.open, self.start, self.applied, self.pure = open_, start, applied, pure
        self.state = _START
        self.comma = False
        self.dict: bool | None = None  # ``{``: a dict (True) or a set (False), once known
        self.string: bool | None = None  # the last value's string kind: bytes (True) or str
        #: Replacements found inside, used if this group cannot be replaced whole.
        self.found: list[tuple[int, int, str]] = []

    def value(self, string: bool | None = None) -> None:
        """A value arrives (``string``: a string literal, bytes or not)."""
        if self.state in (_KEY, _VALUE):
            # Only adjacent strings of one kind concatenate.
            if string is None or self.string is None or string != self.string:
                self.pure = False
        self.string = string
        self.state = _VALUE if self.state in (_COLON, _VALUE) else _KEY

    def comma_(self) -> None:
        if self.state == _KEY and self.open == "{":
            self.pure = self.pure and self.dict is not True
            self.dict = False
        elif self.state in (_START, _COLON):
            self.pure = False
        self.state, self.comma, self.string = _START, True, None

    def colon(self) -> None:
        if self.open != "{" or self.state != _KEY or self.dict is False:
            self.pure = False
        self.dict, self.state, self.string = True, _COLON, None

    def replacement(self, close: str) -> str | None:
        """What the group may be replaced by; None if it is not valid data."""
        if not self.pure or _CLOSE[self.open] != close or self.state == _COLON:
            return None
        if self.state == _START and not self.comma:
            return None  # empty: ``() = x`` is valid where ``(0) = x`` is not
        if self.open == "{":
            if self.state == _KEY and self.dict:
                return None
            return "{0}" if self.dict is False or self.state == _KEY else "{0: 0}"
        if self.open == "[":
            return "[0]"
        return "(0,)" if self.comma and not self.applied else "(0)"


def _string_kind(token: str) -> bool | None:
    """Whether a string literal is bytes (True) or str (False); None when it
    is not one this checker vouches for (f-strings, bad escapes, no end)."""
    # Short ones repeat (keys of a table); long ones would stay in the cache.
    return _short_string_kind(token) if len(token) <= 256 else _kind(token)


@functools.lru_cache(maxsize=4096)
def _short_string_kind(token: str) -> bool | None:
    return _kind(token)


def _kind(token: str) -> bool | None:
    prefix = token[: len(token) - len(token.lstrip("rRbBuU"))]
    rest = token[len(prefix) :]
    if len(prefix) > 2 or not rest or rest[0] not in "'\"" or prefix.lower() not in ("", "r", "u", "b", "br", "rb"):
        return None
    try:
        compile(token, "<literal>", "eval", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, UnicodeEncodeError, MemoryError, RecursionError):
        return None
    return "b" in prefix.lower()


def reduce(text: str) -> str:
    """``text`` with its literal data groups replaced (see the module docstring)."""
    if _REFUSED.search(text):
        return text
    stack: list[_Group] = []
    found: list[tuple[int, int, str]] = []
    previous = ""  # the last character before an opening bracket, outside groups
    pos, size = 0, len(text)
    while pos < size:
        top = stack[-1] if stack else None
        if top is None or not top.pure:
            match = _SKIP.match(text, pos)
            if match is None or match.lastgroup in (None, "end"):
                break
            kind = match.lastgroup
            start = match.start(kind)
            plain = text[pos:start].rstrip()
            if plain:
                previous = plain[-1]
            pos = match.end()
            if kind == "open":
                applied = previous.isalnum() or previous in "_)]}'\""
                stack.append(_Group(text[start], start, applied, len(stack) < _MAX_DEPTH))
                if len(stack) >= _MAX_DEPTH:
                    for group in stack:
                        group.pure = False
            elif kind == "close":
                _close(stack, found, text, start, pos)
            if kind != "comment":
                previous = text[pos - 1]
            continue
        if top.state == _START:
            pairs = top.open == "{" and top.dict is not False
            run = (_FAST_PAIRS if pairs else _FAST_RUN).match(text, pos) or (_PAIRS if pairs else _RUN).match(text, pos)
            if run is not None:
                if top.open == "{":
                    top.dict = pairs
                top.comma, top.string = True, None
                pos = run.end()
                continue
        match = _TOKEN.match(text, pos)
        if match is None:
            top.pure = False
            continue
        kind = match.lastgroup or ""
        token = match.group()
        start, pos = match.start(), match.end()
        if kind == "ws":
            continue
        if kind == "string":
            bytes_ = _string_kind(token)
            if bytes_ is None:
                top.pure = False
            else:
                top.value(bytes_)
        elif kind == "number":
            if _NUMBER_ONLY.fullmatch(token) is None:
                top.pure = False
            top.value()
        elif kind == "name":
            if token not in _LITERAL_NAMES:
                top.pure = False
            top.value()
        elif kind == "unary":
            if top.state not in (_START, _COLON) or _OPERAND.match(text, pos) is None:
                top.pure = False
            # The number after it completes the value.
        elif kind == "comma":
            top.comma_()
        elif kind == "colon":
            top.colon()
        elif kind == "open":
            applied = top.state in (_KEY, _VALUE)
            if applied:
                top.pure = False  # a call or subscript of a value inside data
            stack.append(_Group(token, start, applied, len(stack) < _MAX_DEPTH))
            if len(stack) >= _MAX_DEPTH:
                for group in stack:
                    group.pure = False
        elif kind == "close":
            _close(stack, found, text, start, pos)
        previous = text[pos - 1]
    for group in stack:  # never closed: the compiler refuses it anyway
        found.extend(group.found)
    if not found:
        return text
    pieces, at = [], 0
    for begin, end, replacement in sorted(found):
        pieces.append(text[at:begin])
        pieces.append(replacement)
        at = end
    pieces.append(text[at:])
    return "".join(pieces)


def _close(stack: list[_Group], found: list[tuple[int, int, str]], text: str, start: int, end: int) -> None:
    """A closing bracket at ``start``: the group it ends is replaced, or
    left with what was found inside it."""
    if not stack:
        return
    group = stack.pop()
    replacement = group.replacement(text[start])
    parent = stack[-1] if stack else None
    if replacement is None:
        found.extend(group.found)
        if parent is not None:
            parent.pure = False
        return
    if parent is not None and parent.pure:
        # The parent may be replaced whole; if not, this group is.
        parent.value()
        if end - group.start >= REPLACE_FROM:
            parent.found.append((group.start, end, replacement))
        return
    if end - group.start >= REPLACE_FROM:
        found.append((group.start, end, replacement))
