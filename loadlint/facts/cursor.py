"""The shared scope and loop cursor, and the imports-and-names provider.

One traversal drives every provider (``loadlint.facts.collect``); the cursor
runs first on the way down and last on the way up, so a provider always sees
the scope, loops and enclosing function of the node it is given.  It is made
of one part per concern: scopes, bindings and definitions
(``loadlint.facts.scopes``), blocks and loops (``loadlint.facts.control``),
and here the calls being visited; the hooks several parts need are joined
here.
"""

from __future__ import annotations

from typing import ClassVar, Generic, TypeVar

import libcst as cst

from loadlint.facts.control import FlowCursor
from loadlint.facts.names import Key, LambdaFacts
from loadlint.facts.resolve import canonical, dotted_name
from loadlint.facts.scopes import ScopeCursor, literal_members, member
from loadlint.facts.signature import DATALOADER


def root_name(node: cst.BaseExpression) -> str | None:
    """``x`` for ``x.a[0].b()``; None when the chain starts elsewhere."""
    while isinstance(node, (cst.Attribute, cst.Subscript, cst.Call)):
        node = node.func if isinstance(node, cst.Call) else node.value
    return node.value if type(node) is cst.Name else None


def callee_name(func: cst.BaseExpression) -> str:
    """The called name: ``f`` for ``f(...)`` and ``a.f(...)``, else ""."""
    return func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else ""


class Cursor(ScopeCursor, FlowCursor):
    """Where the traversal is, and what the names there refer to."""

    def __init__(self) -> None:
        ScopeCursor.__init__(self)
        FlowCursor.__init__(self)
        #: id of a call -> the targets it is assigned to.
        self.pending_targets: dict[int, list[cst.BaseExpression]] = {}
        #: id of a call written as a member of a container literal that is
        #: assigned -> (the target, the member's key).
        self.pending_members: dict[int, tuple[cst.BaseExpression, str | int]] = {}
        #: ids of calls that are returned.
        self.pending_return: set[int] = set()
        #: The qualified name of the call being visited (set before providers see it).
        self.qualified: str | None = None
        #: Calls being visited, innermost last: each, the names it records
        #: (None: none), and its callee's dotted name.
        self._open_calls: list[tuple[cst.Call, set[str] | None, str | None]] = []

    def target_key(self, call: cst.Call) -> Key | None:
        """The key of the one variable a call is assigned to."""
        targets = self.pending_targets.get(id(call))
        if targets is None and id(call) in self.pending_members:
            target, index = self.pending_members[id(call)]
            base = self.key_of(target)
            return None if base is None else (base[0], member(base[1], index))
        return self.key_of(targets[0]) if targets and len(targets) == 1 else None

    @property
    def callee(self) -> str | None:
        """The dotted name of the call being visited or left (``a.b.f`` of
        ``a.b.f(x)``; None for another callee): providers' call hooks run
        while it is the innermost open call."""
        return self._open_calls[-1][2]

    def loop_ids(self) -> tuple[int, ...]:
        return tuple(id(frame.node) for frame in self.loops)

    # -- hooks of several parts ----------------------------------------------

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        ScopeCursor.visit_FunctionDef(self, node)
        self._enter_function()

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        ScopeCursor.leave_FunctionDef(self, original_node)
        self._leave_function()

    def visit_For(self, node: cst.For) -> None:
        self._bind_target(node.target, None)
        FlowCursor.visit_For(self, node)

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        params = node.params
        names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
        for star in (params.star_arg, params.star_kwarg):
            if type(star) is cst.Param:
                names.add(star.name.value)
        facts = LambdaFacts(node, self.scope, names)
        self.names.lambdas[id(node)] = facts
        self.lambdas.append(facts)
        for call, _, _ in self._open_calls:
            self.names.calls_with_lambda.add(id(call))
        return True

    def visit_Assign(self, node: cst.Assign) -> None:
        self.order += 1
        single = len(node.targets) == 1
        for target in node.targets:
            t = target.target
            self._bind_target(t, node.value if single and (type(t) is cst.Name or type(t) is cst.Tuple) else None)
            if type(t) is cst.Subscript:
                self._record_setitem(t, node.value)
        if type(node.value) is cst.Call:
            self.pending_targets[id(node.value)] = [t.target for t in node.targets]
        elif single:
            self._pend_members(node.targets[0].target, node.value)

    def _pend_members(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """``loaders = {"train": DataLoader(...)}``: each call's member key."""
        if type(target) is not cst.Name and type(target) is not cst.Attribute:
            return
        for index, element in literal_members(value) or ():
            if type(element) is cst.Call:
                self.pending_members[id(element)] = (target, index)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.order += 1
        self._bind_target(node.target, node.value if type(node.target) is cst.Name else None)
        if type(node.value) is cst.Call:
            self.pending_targets[id(node.value)] = [node.target]
        elif node.value is not None:
            self._pend_members(node.target, node.value)

    def visit_Return(self, node: cst.Return) -> None:
        if type(node.value) is cst.Call:
            self.pending_return.add(id(node.value))

    # -- expressions ----------------------------------------------------------

    def visit_Name(self, node: cst.Name) -> None:
        # The most frequent node: no property, one attribute read each.
        value = node.value
        functions = self.functions
        if functions:
            functions[-1].names_used.add(value)
        lambdas = self.lambdas
        if lambdas:
            lambdas[-1].names_used.add(value)
        for _, names, _ in self._open_calls:
            if names is not None:
                names.add(value)

    def visit_Call(self, node: cst.Call) -> None:
        self.order += 1
        func = node.func
        dotted = dotted_name(func)
        self.qualified = qualified = canonical(self.imports.qualify_dotted(dotted))
        # Names are kept only for constructor-like calls: datasets, transforms
        # and the loader itself, which is what the rules ask about.
        names: set[str] | None = None
        if qualified == DATALOADER or callee_name(func)[:1].isupper():
            names = self.names.call_names.setdefault(id(node), set())
        self._open_calls.append((node, names, dotted))
        if type(func) is cst.Attribute and type(func.value) is cst.Name:
            method = func.attr.value
            if method == "update":
                value = node.args[0].value if len(node.args) == 1 and node.args[0].keyword is None else None
                self._mutate(func.value.value, "update" if value is not None else "other", value)
            elif method in ("pop", "setdefault", "clear", "popitem"):
                self._mutate(func.value.value, "other")

    def leave_Call(self, original_node: cst.Call) -> None:
        self._open_calls.pop()



Facts = TypeVar("Facts")


class Provider(Generic[Facts]):
    """A fact provider: its ``visit_*``/``leave_*`` hooks run in the one
    traversal, after (on the way up: before) the cursor's, and fill ``facts``."""

    #: Its ``finish`` binds names that the others' read (command-line
    #: namespaces hold devices): it finishes first.
    binds_names: ClassVar[bool] = False

    def __init__(self, cursor: Cursor, facts: Facts) -> None:
        self.cursor = cursor
        self.facts = facts

    def finish(self, module: cst.Module, text: str | None) -> None:
        """Settle, after the traversal, what needs the whole module."""
