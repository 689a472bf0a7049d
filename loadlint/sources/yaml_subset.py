"""A safe reader for the plain subset of YAML that configuration files
beside training code use: nested ``key: scalar`` mappings.

It builds nothing but dicts and scalars, and never runs, imports or
resolves anything (no tags, anchors or includes).  Anything outside the
subset (a list, a flow mapping, a block scalar, an anchor or alias, a tag,
an interpolation such as ``${data.workers}``, several documents) makes that
key's value unknown, or the whole file unknown when its structure cannot be
followed: the rules stay silent on unknown values.

Scalars: decimal integers, floats, ``true``/``false``, ``null``/``~``,
quoted strings without escapes, and plain strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Union

#: Bytes read at most: a configuration file, not a data set.
MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Scalar:
    """A value and the 1-based line it is written on."""

    value: object
    line: int


class Unknown:
    """A value outside the subset; for a list of one-line items, their
    text (Hydra's ``defaults`` list is read from it)."""

    __slots__ = ("line", "items")

    def __init__(self, line: int, items: list[str] | None = None) -> None:
        self.line = line
        self.items = items


Node = Union[Scalar, Unknown, "Mapping"]
Mapping = dict[str, Node]

_KEY = re.compile(r"(?P<key>[A-Za-z_][\w.-]*|'[^']*'|\"[^\"\\]*\")[ \t]*:(?:[ \t]+(?P<value>.*))?$")
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)\Z")
#: With a dot: ``1e3`` is a string to YAML 1.1 loaders and a float to others.
_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\Z")
_AMBIGUOUS = frozenset({"yes", "no", "on", "off", "y", "n"})
_SPECIAL = set("[]{}&*!|>%@`")


def parse(text: str) -> Mapping | None:
    """The mapping a YAML text holds, or None when it is not in the subset."""
    if len(text) > MAX_BYTES:
        return None
    root: Mapping = {}
    #: (indent of its keys, mapping) of the open blocks, innermost last.
    stack: list[tuple[int, Mapping]] = [(-1, root)]
    #: A key waiting for its value on the next lines: (indent, mapping, key, line).
    pending: tuple[int, Mapping, str, int] | None = None
    #: A list being skipped: the indent of its key and of its items, and the node.
    listing: tuple[int, int, Unknown] | None = None
    started = False
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _strip_comment(raw)
        if line is None:
            return None
        if not line.strip():
            continue
        if line.startswith(("---", "...")) and not line.strip("-. \t"):
            if started:
                return None  # a second document
            continue
        if line.startswith("%") or "\t" in line[: len(line) - len(line.lstrip())]:
            return None  # a directive, or tabs in the indentation
        started = True
        indent = len(line) - len(line.lstrip(" "))
        body = line.strip()
        is_item = body == "-" or body.startswith("- ")
        if listing is not None:
            key_indent, item_indent, node = listing
            if indent > key_indent or (indent == key_indent and is_item):
                if is_item and indent == item_indent and node.items is not None:
                    node.items.append(body[1:].strip())
                else:
                    node.items = None  # an item spread over lines
                continue
            listing = None
        if pending is not None:
            owner_indent, owner, key, at = pending
            pending = None
            if is_item and indent >= owner_indent:
                node = owner[key] = Unknown(at, [body[1:].strip()])
                listing = (owner_indent, indent, node)
                continue
            if indent > owner_indent:
                child: Mapping = {}
                owner[key] = child
                stack.append((indent, child))
            else:
                owner[key] = Scalar(None, at)
        while len(stack) > 1 and indent < stack[-1][0]:
            stack.pop()
        if stack[-1][0] == -1:
            stack[-1] = (indent, root)
        if indent != stack[-1][0] or is_item:
            return None
        mapping = stack[-1][1]
        match = _KEY.match(body)
        if match is None:
            return None
        key = match.group("key")
        if key[0] in "'\"":
            key = key[1:-1]
        elif key.lower() in _AMBIGUOUS or key.lower() in ("true", "false", "null"):
            key = "\0" + key  # read as a boolean or null by some loaders: no attribute reads it
        if key in mapping:
            return None  # a duplicate key: which one a loader keeps is not ours to guess
        value = match.group("value")
        if value is None or not value.strip():
            pending = (indent, mapping, key, number)
        else:
            mapping[key] = _scalar(value.strip(), number)
    if pending is not None:
        pending[1][pending[2]] = Scalar(None, pending[3])
    return root


def _strip_comment(line: str) -> str | None:
    """The line without its comment; None when a quote is left open."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1] in " \t"):
            return line[:index].rstrip()
    return None if quote else line.rstrip()


def _scalar(text: str, line: int) -> Node:
    if text[0] in "'\"":
        if len(text) < 2 or text[-1] != text[0] or text[0] in text[1:-1] or "\\" in text:
            return Unknown(line)
        return Scalar(text[1:-1], line)
    if text[0] in _SPECIAL or "${" in text or ": " in text or text.endswith(":"):
        return Unknown(line)
    lowered = text.lower()
    if lowered in ("true", "false"):
        return Scalar(lowered == "true", line)
    if lowered in ("null", "~"):
        return Scalar(None, line)
    if lowered in _AMBIGUOUS or re.fullmatch(r"[-+]?[0-9]+[eE][-+]?[0-9]+", text):
        return Unknown(line)  # YAML 1.1 reads these as booleans, 1.2 as strings
    if _INT.match(text):
        return Scalar(int(text), line)
    if _FLOAT.match(text):
        return Scalar(float(text), line)
    if lowered in (".inf", "-.inf", "+.inf", ".nan") or text.startswith(("0x", "0o", "0b")) or "_" in text and text.replace("_", "").isdigit():
        return Unknown(line)
    return Scalar(text, line)
