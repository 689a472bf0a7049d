"""Calls between functions: every call by a dotted name, with where it is
made (function, loop, main guard) and what its result is assigned to; the
values functions return; relative imports.  ``loadlint.facts.summary``
turns these into a module's serialisable summary for project analysis."""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field

import libcst as cst

from loadlint.facts.cursor import Provider
from loadlint.facts.names import FunctionFacts
from loadlint.facts.resolve import Scope, dotted_name, imported_names


@dataclass(eq=False)
class CallSite:
    """``f(...)`` or ``a.b.f(...)``."""

    node: cst.Call
    callee: str
    scope: Scope
    function: FunctionFacts | None
    in_loop: bool
    in_main_guard: bool
    #: The assignment targets of the call's result (one entry per ``=``).
    targets: tuple[cst.BaseExpression, ...]


@dataclass
class CallFacts:
    """The calls of a module, its returns and its relative imports."""

    sites: list[CallSite] = field(default_factory=list)
    #: (function or None for the module, returned expression)
    returns: list[tuple[FunctionFacts | None, cst.BaseExpression]] = field(default_factory=list)
    #: local name -> dotted target with leading dots (``from .engine import train``).
    relative: dict[str, str] = field(default_factory=dict)
    #: ``from .engine import *``: the dotted module with its leading dots.
    relative_stars: list[str] = field(default_factory=list)


_BUILTINS = frozenset(dir(builtins))


class CallProvider(Provider[CallFacts]):
    """Records calls by name, returns and relative imports."""

    def leave_Call(self, original_node: cst.Call) -> None:
        # On the way up: a call's arguments' calls come first, so a value
        # passed as ``f(g())`` is known before ``f`` is entered.
        node = original_node
        callee = self.cursor.callee
        if callee is None or callee.startswith("self."):
            return
        cursor = self.cursor
        self.facts.sites.append(
            CallSite(
                node,
                callee,
                cursor.scope,
                cursor.function,
                bool(cursor.loops),
                cursor.main_guard_depth > 0,
                tuple(cursor.pending_targets.get(id(node), ())),
            )
        )

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:
            self.facts.returns.append((self.cursor.function, node.value))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if not node.relative:
            return
        base = "." * len(node.relative) + (dotted_name(node.module) or "" if node.module is not None else "")
        if isinstance(node.names, cst.ImportStar):
            self.facts.relative_stars.append(base)
            return
        joiner = "" if base.endswith(".") else "."
        for local, name in imported_names(node):
            self.facts.relative[local] = f"{base}{joiner}{name}"


def star_names(calls: CallFacts, stars: list[str], imports: dict[str, str]) -> dict[str, str]:
    """Under one ``from helpers import *`` (a notebook's, or ``%run
    helpers.py``), each called name bound nowhere else, as that module's:
    project analysis finds the function there or nothing.  Under two, the
    one that binds a name is not known here: none."""
    every = stars + calls.relative_stars
    if len(every) != 1:
        return {}
    prefix = every[0] if every[0].endswith(".") else every[0] + "."
    out: dict[str, str] = {}
    for site in calls.sites:
        head = site.callee.partition(".")[0]
        if head not in imports and head not in _BUILTINS and site.scope.lookup(head) is None:
            out[head] = prefix + head
    return out
