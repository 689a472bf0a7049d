""".gitignore patterns matched in time linear in the pattern times the path.

A regular expression made from a glob backtracks: ``*a*a*a*a*a*a*a*a*a*a*b``
against a name of thirty ``a`` tries every way to split the name among the
stars, and a repository chooses both.  Here each path segment is matched by
the classic two-pointer wildcard algorithm (a mismatch resumes after the
last star only) and ``**`` by a table over segments, so no input costs more
than (pattern length) x (path length) steps.

Semantics are git's (gitignore(5)): ``*``, ``?`` and ``[...]`` never match
``/``; a pattern with a slash before its end is anchored to the folder of
its file, else it matches at any depth; a trailing ``/`` matches folders
only; ``**`` as a whole segment matches any number of folders; ``!``
negates, the last matching line wins; ``\\`` escapes.  A pattern that
matches a folder matches everything below it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

_STAR = object()
_ANY_SEGMENTS = "**"


@dataclass(frozen=True)
class _Pattern:
    negate: bool
    dir_only: bool
    #: Segments; each is a tuple of tokens (a character, ``_STAR``, ``"?"`` as
    #: ``None``, or a class as (negated, frozenset of chars, ranges)), or
    #: ``_ANY_SEGMENTS``.
    segments: tuple[object, ...]
    #: "abc/**": also the folder abc itself (git ignores it too).
    inside: bool = False


def _tokens(segment: str) -> tuple[object, ...] | None:
    """A segment's tokens; None for one that can match nothing."""
    out: list[object] = []
    i = 0
    while i < len(segment):
        ch = segment[i]
        if ch == "\\":
            if i + 1 >= len(segment):
                return None  # a trailing backslash: git matches nothing
            out.append(segment[i + 1])
            i += 2
        elif ch == "*":
            while i < len(segment) and segment[i] == "*":
                i += 1
            out.append(_STAR)
        elif ch == "?":
            out.append(None)
            i += 1
        elif ch == "[":
            parsed = _bracket(segment, i)
            if parsed is None:
                out.append("[")
                i += 1
            else:
                token, i = parsed
                out.append(token)
        else:
            out.append(ch)
            i += 1
    return tuple(out)


_CLASSES: dict[str, Callable[[str], bool]] = {
    "alnum": str.isalnum, "alpha": str.isalpha, "blank": lambda c: c in " \t", "cntrl": lambda c: ord(c) < 32 or ord(c) == 127,
    "digit": str.isdigit, "graph": lambda c: c.isprintable() and not c.isspace(), "lower": str.islower,
    "print": str.isprintable, "punct": lambda c: c.isprintable() and not c.isalnum() and not c.isspace(),
    "space": str.isspace, "upper": str.isupper, "xdigit": lambda c: c in "0123456789abcdefABCDEF",
}


#: A bracket expression: negated, its characters, its ranges, its [:classes:].
_Class = tuple[bool, frozenset[str], tuple[tuple[str, str], ...], tuple[str, ...]]


def _bracket(segment: str, start: int) -> tuple[_Class, int] | None:
    """The class starting at ``segment[start] == "["`` and the index after
    it; None when unterminated (the ``[`` is then a plain character)."""
    i = start + 1
    negated = i < len(segment) and segment[i] in "!^"
    if negated:
        i += 1
    chars: set[str] = set()
    ranges: list[tuple[str, str]] = []
    classes: list[str] = []
    first = True
    while i < len(segment):
        ch = segment[i]
        if ch == "]" and not first:
            return (negated, frozenset(chars), tuple(ranges), tuple(classes)), i + 1
        first = False
        if ch == "[" and segment.startswith("[:", i):
            end = segment.find(":]", i + 2)
            if end != -1 and segment[i + 2 : end] in _CLASSES:
                classes.append(segment[i + 2 : end])
                i = end + 2
                continue
        if ch == "\\" and i + 1 < len(segment):
            i += 1
            ch = segment[i]
        if i + 2 < len(segment) and segment[i + 1] == "-" and segment[i + 2] != "]":
            high = segment[i + 2]
            if high == "\\" and i + 3 < len(segment):
                high = segment[i + 3]
                i += 1
            ranges.append((ch, high))
            i += 3
            continue
        chars.add(ch)
        i += 1
    return None


def _one(token: object, ch: str) -> bool:
    if token is None:
        return True
    if isinstance(token, str):
        return token == ch
    klass: _Class = token  # type: ignore[assignment]
    negated, chars, ranges, classes = klass
    hit = ch in chars or any(lo <= ch <= hi for lo, hi in ranges) or any(_CLASSES[c](ch) for c in classes)
    return hit != negated


def _segment_matches(tokens: tuple[object, ...], name: str) -> bool:
    """Whether ``name`` (no ``/``) matches; a mismatch goes back only to the
    last star, which is enough for stars that cannot cross a ``/``."""
    t = n = 0
    star_t = star_n = -1
    while n < len(name):
        if t < len(tokens) and tokens[t] is not _STAR and _one(tokens[t], name[n]):
            t += 1
            n += 1
        elif t < len(tokens) and tokens[t] is _STAR:
            star_t, star_n = t, n
            t += 1
        elif star_t >= 0:
            star_n += 1
            n = star_n
            t = star_t + 1
        else:
            return False
    while t < len(tokens) and tokens[t] is _STAR:
        t += 1
    return t == len(tokens)


def compile_line(line: str) -> _Pattern | None:
    """One .gitignore line; None for a blank line, a comment or a pattern
    that can match nothing."""
    # Trailing spaces are dropped unless escaped.
    end = len(line)
    while end > 0 and line[end - 1] == " " and not (end > 1 and line[end - 2] == "\\"):
        end -= 1
    line = line[:end]
    if not line or line.startswith("#"):
        return None
    negate = line.startswith("!")
    if negate:
        line = line[1:]
    dir_only = line.endswith("/")
    if dir_only:
        line = line[:-1]
    if not line:
        return None
    anchored = "/" in line
    parts = (line[1:] if line.startswith("/") else line).split("/")
    segments: list[object] = [] if anchored else [_ANY_SEGMENTS]
    for part in parts:
        if not part:
            return None  # "a//b": no path has an empty name
        if _all_folders(part):
            if not segments or segments[-1] is not _ANY_SEGMENTS:
                segments.append(_ANY_SEGMENTS)
            continue
        tokens = _tokens(part)
        if tokens is None:
            return None
        segments.append(tokens)
    inside = bool(segments) and segments[-1] is _ANY_SEGMENTS and _all_folders(parts[-1])
    if inside:
        # "abc/**": everything inside abc, at least one more segment.
        segments.append((_STAR,))
    return _Pattern(negate, dir_only, tuple(segments), inside)


def _all_folders(part: str) -> bool:
    """A whole segment of two or more stars (git reads ``***`` as ``**``)."""
    return len(part) >= 2 and part.count("*") == len(part)


def _prefix_matches(segments: tuple[object, ...], names: list[str]) -> list[bool]:
    """For each k, whether the pattern matches the first k names exactly
    (a table over segments: each ``**`` takes any number of names)."""
    # reach[j]: the segments so far match names[:j].
    reach = [True] + [False] * len(names)
    for segment in segments:
        if segment is _ANY_SEGMENTS:
            seen = False
            for j in range(len(reach)):
                seen = seen or reach[j]
                reach[j] = seen
            continue
        tokens: tuple[object, ...] = segment  # type: ignore[assignment]
        reach = [False] + [reach[j] and _segment_matches(tokens, names[j]) for j in range(len(names))]
    return reach


def pattern_matches(pattern: _Pattern, rel: str, is_dir: bool) -> bool:
    """Whether ``pattern`` matches the relative path or a folder above it."""
    names = [name for name in rel.split("/") if name]
    if not names:
        return False
    reach = _prefix_matches(pattern.segments, names)
    # A folder above the path is a folder; the path itself only if is_dir.
    if any(reach[k] for k in range(1, len(names))) or (reach[len(names)] and (is_dir or not pattern.dir_only)):
        return True
    # "abc/**" on the folder abc itself, as git check-ignore answers.
    return pattern.inside and is_dir and _prefix_matches(pattern.segments[:-2], names)[len(names)]


class LinearSpec:
    """A .gitignore's lines: ``ignored(rel)`` by the last matching line."""

    def __init__(self, lines: list[str]) -> None:
        self.patterns = [p for p in map(compile_line, lines) if p is not None]

    def decide(self, rel: str) -> bool | None:
        """True (ignored), False (re-included by ``!``) or None (no line matches).
        ``rel`` ends with ``/`` for a folder."""
        is_dir = rel.endswith("/")
        for pattern in reversed(self.patterns):
            if pattern_matches(pattern, rel, is_dir):
                return not pattern.negate
        return None


@dataclass(frozen=True)
class Check:
    """``check_file``'s answer, shaped as pathspec's: ``include`` is None when no line matches."""

    include: bool | None


def check_file(spec: LinearSpec, rel: str) -> Check:
    return Check(spec.decide(rel))


def star_runs(line: str) -> int:
    """How many runs of ``*`` a pattern has: a regex made from it may try
    about (path length) to this power splits."""
    runs = 0
    previous = ""
    for ch in line:
        if ch == "*" and previous != "*":
            runs += 1
        previous = ch
    return runs
