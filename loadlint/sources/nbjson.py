"""Splicing fixed cell sources into a notebook's original JSON text.

Fixing never re-serialises the document: each changed cell's ``source`` is
written at the exact span of the old one, in the file's own style (a string
or a list of lines, its indentation, its escaping of non-ASCII text), and
the result is verified by parsing it back.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from typing import Any


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
_WS = re.compile(r"[ \t\r\n]*")
_SCALAR = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null|NaN|-?Infinity")


def _ws(text: str, i: int) -> int:
    return _end(_WS.match(text, i), i)


def _end(match: re.Match[str] | None, i: int) -> int:
    if match is None:
        raise ValueError(f"unexpected JSON at offset {i}")
    return match.end()


def _skip(text: str, i: int) -> int:
    """The end of the JSON value starting at ``i`` (the text is valid JSON)."""
    ch = text[i]
    if ch == '"':
        return _end(_STRING.match(text, i), i)
    if ch in "[{":
        depth = 0
        for match in _TOKEN.finditer(text, i):
            token = match.group()
            if token == "[" or token == "{":
                depth += 1
            elif token == "]" or token == "}":
                depth -= 1
                if depth == 0:
                    return match.end()
        raise ValueError("unbalanced JSON")
    return _end(_SCALAR.match(text, i), i)


def _members(text: str, i: int) -> list[tuple[str, int, int, int]]:
    """(key, key start, value start, value end) of the object at ``i``."""
    out: list[tuple[str, int, int, int]] = []
    i = _ws(text, i + 1)
    if text[i] == "}":
        return out
    while True:
        key_match = _STRING.match(text, i)
        if key_match is None:
            raise ValueError(f"expected a key at offset {i}")
        key = json.loads(key_match.group())
        i = _ws(text, key_match.end())
        i = _ws(text, i + 1)  # the colon
        end = _skip(text, i)
        out.append((key, key_match.start(), i, end))
        i = _ws(text, end)
        if text[i] == "}":
            return out
        i = _ws(text, i + 1)  # the comma


def _items(text: str, i: int) -> list[tuple[int, int]]:
    """(start, end) of each element of the array at ``i``."""
    out: list[tuple[int, int]] = []
    i = _ws(text, i + 1)
    if text[i] == "]":
        return out
    while True:
        end = _skip(text, i)
        out.append((i, end))
        i = _ws(text, end)
        if text[i] == "]":
            return out
        i = _ws(text, i + 1)


@dataclass
class _SourceSpan:
    key_start: int
    start: int
    end: int
    #: Element spans when the value is a list of lines.
    items: list[tuple[int, int]] | None


def source_spans(text: str) -> dict[int, _SourceSpan]:
    """Cell index (1-based) -> the span of its ``source`` value in ``text``."""
    top = _ws(text, 0)
    cells = [m for m in _members(text, top) if m[0] == "cells"]
    if not cells:
        return {}
    _, _, start, _ = cells[-1]  # json.loads keeps the last duplicate key too
    out = {}
    for index, (cell_start, _) in enumerate(_items(text, start), 1):
        if text[cell_start] != "{":
            continue
        sources = [m for m in _members(text, cell_start) if m[0] == "source"]
        if not sources:
            continue
        _, key_start, value_start, value_end = sources[-1]
        items = _items(text, value_start) if text[value_start] == "[" else None
        out[index] = _SourceSpan(key_start, value_start, value_end, items)
    return out


def cell_lines(text: str) -> dict[int, list[int]]:
    """Cell index (1-based) -> the 1-based line of ``text`` (the notebook's
    JSON) on which each row of the cell's source starts: where CI viewers
    can point at a finding inside a cell."""
    breaks = [m.start() for m in re.finditer("\n", text)]

    def line(offset: int) -> int:
        return bisect.bisect_left(breaks, offset) + 1

    out: dict[int, list[int]] = {}
    for index, span in source_spans(text).items():
        pieces = span.items if span.items is not None else [(span.start, span.end)]
        rows: list[int] = []
        starts_row = True
        for start, end in pieces:
            piece = json.loads(text[start:end])
            if not isinstance(piece, str):
                break
            here = line(start)
            if starts_row:
                rows.append(here)
            inner = piece[:-1] if piece.endswith("\n") else piece
            rows += [here] * inner.count("\n")
            starts_row = piece.endswith("\n")
        out[index] = rows
    return out


def _ensure_ascii(text: str) -> bool:
    """Whether the file escapes non-ASCII text (``\\u00e9``) rather than
    writing it as UTF-8.  nbformat writes UTF-8, so that is the default."""
    if not text.isascii():
        return False
    return re.search(r"\\u(?:00[89a-fA-F][0-9a-fA-F]|0[1-9a-fA-F][0-9a-fA-F]{2}|[1-9a-fA-F][0-9a-fA-F]{3})", text) is not None


def _layout(text: str, span: _SourceSpan) -> tuple[str, str, str]:
    """(after ``[``, between items, before ``]``) as this file writes lists."""
    items = span.items or []
    if len(items) >= 2:
        return text[span.start + 1 : items[0][0]], text[items[0][1] : items[1][0]], text[items[-1][1] : span.end - 1]
    if len(items) == 1:
        before, after = text[span.start + 1 : items[0][0]], text[items[0][1] : span.end - 1]
        return before, "," + (before if before else _space_after_comma(text)), after
    newline = "\r\n" if "\r\n" in text[:4096] else "\n"
    line_start = max(text.rfind("\n", 0, span.key_start), text.rfind("\r", 0, span.key_start)) + 1
    indent = text[line_start : span.key_start]
    if line_start == 0 or indent.strip():
        return "", "," + _space_after_comma(text), ""  # a compact file
    first = _ws(text, _ws(text, 0) + 1)
    unit_start = max(text.rfind("\n", 0, first), text.rfind("\r", 0, first)) + 1
    unit = text[unit_start:first] or " "
    return newline + indent + unit, "," + newline + indent + unit, newline + indent


def _space_after_comma(text: str) -> str:
    return " " if re.search(r'",\s', text[:4096]) else ""


def render_source(text: str, span: _SourceSpan, new: str, ensure_ascii: bool) -> str:
    """The JSON for a new ``source`` value in the file's own style."""
    if span.items is None:
        return json.dumps(new, ensure_ascii=ensure_ascii)
    # Lines that did not change keep their original bytes (their escapes).
    raw: dict[str, str] = {}
    for start, end in span.items:
        token = text[start:end]
        raw.setdefault(json.loads(token), token)
    tokens = [raw.get(line) or json.dumps(line, ensure_ascii=ensure_ascii) for line in new.splitlines(True)]
    if not tokens:
        return "[]"
    before, between, after = _layout(text, span)
    return "[" + before + between.join(tokens) + after + "]"


def splice(text: str, doc: dict[str, Any], changes: dict[int, str]) -> str:
    """``text`` with the ``source`` of each changed cell replaced, all else
    untouched; verified by parsing the result back."""
    spans = source_spans(text)
    ascii_only = _ensure_ascii(text)
    pieces = []
    last = 0
    for index in sorted(changes):
        span = spans.get(index)
        if span is None:
            raise ValueError(f"cannot locate the source of cell {index}")
        pieces.append(text[last : span.start])
        pieces.append(render_source(text, span, changes[index], ascii_only))
        last = span.end
    pieces.append(text[last:])
    new_text = "".join(pieces)
    check_doc = json.loads(new_text)
    for index, source in changes.items():
        cell = check_doc["cells"][index - 1]
        got = cell["source"]
        if ("".join(got) if isinstance(got, list) else got) != source:
            raise ValueError(f"splicing cell {index} did not give the fixed source")
        cell["source"] = doc["cells"][index - 1]["source"]
    if check_doc != doc:
        raise ValueError("splicing changed more than the fixed cells")
    return new_text
