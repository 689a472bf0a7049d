"""An editor's next text, parsed again only in the top-level statements
that differ from the last analysis's text: typing in one function does not
re-parse the file."""

from __future__ import annotations

from loadlint.engine.analysis import Analysis, Parsed, sliced
from loadlint.engine.positions import reparse
from loadlint.types import Edit, Location


def reparsed(previous: Analysis | None, text: str) -> Parsed | None:
    """The tree of ``text``, the statements of ``previous`` that the change
    leaves alone kept; None to parse it all (no previous analysis, a file
    parsed in part, or a change that no statement holds on its own)."""
    if previous is None or previous.positions.piece is not None or sliced(text) is not None:
        return None
    old = previous.text
    size = min(len(old), len(text))
    start = 0
    while start < size and old[start] == text[start]:
        start += 1
    end = 0
    while end < size - start and old[len(old) - 1 - end] == text[len(text) - 1 - end]:
        end += 1
    bounds = previous.positions.bounds
    if bounds is None:
        return None
    edit = Edit(text[start : len(text) - end], start, len(old) - end, Location(1, 1), Location(1, 1))
    module = reparse(previous.module, old, bounds, [edit], text)
    return None if module is None else (module, None)
