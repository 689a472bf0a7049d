"""A fast traversal of a libcst tree for read-only visitors.

``module.visit(visitor)`` rebuilds every node it passes (libcst's visitors
and transformers share one code path) and walks into every whitespace and
punctuation node; on a 20 kB file that costs as much as parsing it.  This
walker calls the same ``visit_<Node>``, ``leave_<Node>`` and
``visit_<Node>_<field>`` / ``leave_<Node>_<field>`` methods of a
``CSTVisitor``, but only descends into fields that can hold code, and
creates nothing.  A ``visit_<Node>`` returning False skips the children, as
in libcst.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import libcst as cst

#: Fields that only ever hold whitespace, comments or punctuation.
_SKIP_PREFIXES = ("whitespace", "lpar", "rpar", "comma", "semicolon", "leading_lines", "lines_after", "header",
                  "footer", "trailing_whitespace", "lbracket", "rbracket", "lbrace", "rbrace", "equal", "dot",
                  "colon", "asynchronous", "first_line", "empty_lines", "last_line", "newline", "indent")

_PLAN: dict[type, tuple[tuple[str, Any, Any, Any, Any], ...]] = {}
_HOOKS: dict[tuple[type, type], tuple[Any, Any, tuple]] = {}


def _fields(node_type: type) -> tuple[str, ...]:
    names = []
    for field in dataclasses.fields(node_type):
        name = field.name
        if name.startswith(_SKIP_PREFIXES) or name in ("operator", "default_indent", "default_newline", "encoding",
                                                       "has_trailing_newline", "value_raw", "prefix", "quote", "star"):
            continue
        names.append(name)
    return tuple(names)


def _hooks(visitor_type: type, node_type: type):
    key = (visitor_type, node_type)
    hooks = _HOOKS.get(key)
    if hooks is None:
        name = node_type.__name__
        fields = []
        for field in _fields(node_type):
            fields.append((
                field,
                getattr(visitor_type, f"visit_{name}_{field}", None),
                getattr(visitor_type, f"leave_{name}_{field}", None),
            ))
        hooks = (getattr(visitor_type, f"visit_{name}", None), getattr(visitor_type, f"leave_{name}", None), tuple(fields))
        _HOOKS[key] = hooks
    return hooks


def walk(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """Visit ``node`` and its code-bearing descendants in field order."""
    visit, leave, fields = _hooks(type(visitor), type(node))
    if visit is not None and visit(visitor, node) is False:
        if leave is not None:
            leave(visitor, node)
        return
    for field, before, after in fields:
        value = getattr(node, field)
        if before is not None:
            before(visitor, node)
        if isinstance(value, cst.CSTNode):
            walk(value, visitor)
        elif type(value) is tuple or type(value) is list:
            for child in value:
                if isinstance(child, cst.CSTNode):
                    walk(child, visitor)
        if after is not None:
            after(visitor, node)
    if leave is not None:
        leave(visitor, node)
