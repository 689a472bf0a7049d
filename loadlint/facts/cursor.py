"""The shared scope and loop cursor, and the imports-and-names provider.

One traversal drives every provider (``loadlint.facts.collect``); the cursor
runs first on the way down and last on the way up, so a provider always sees
the scope, loops and enclosing function of the node it is given.  It records
bindings (for the value resolver), imports, definitions and lambdas.
"""

from __future__ import annotations

from typing import Generic, Iterator, TypeVar

import libcst as cst

from loadlint.facts.names import ClassFacts, FunctionFacts, Key, LambdaFacts, LoopFrame, NameFacts
from loadlint.facts.resolve import DictMutation, Scope, canonical, dotted_name
from loadlint.facts.signature import DATALOADER


def _is_main_guard(test: cst.BaseExpression) -> bool:
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return False
    left, right = test.left, test.comparisons[0].comparator
    if type(test.comparisons[0].operator) is not cst.Equal:
        return False
    names = {dotted_name(left), dotted_name(right)}
    strings = {n.evaluated_value for n in (left, right) if type(n) is cst.SimpleString}
    return "__name__" in names and "__main__" in strings


def names_in(target: cst.BaseExpression) -> Iterator[str]:
    """The names an assignment or loop target binds."""
    if type(target) is cst.Name:
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from names_in(element.value)
    elif type(target) is cst.StarredElement:
        yield from names_in(target.value)


def root_name(node: cst.BaseExpression) -> str | None:
    """``x`` for ``x.a[0].b()``; None when the chain starts elsewhere."""
    while isinstance(node, (cst.Attribute, cst.Subscript, cst.Call)):
        node = node.func if isinstance(node, cst.Call) else node.value
    return node.value if type(node) is cst.Name else None


def callee_name(func: cst.BaseExpression) -> str:
    """The called name: ``f`` for ``f(...)`` and ``a.f(...)``, else ""."""
    return func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else ""


class Cursor:
    """Where the traversal is, and what the names there refer to."""

    def __init__(self) -> None:
        self.names = NameFacts()
        self.imports = self.names.imports
        self.scope: Scope = self.names.module_scope
        self.loops: list[LoopFrame] = []
        #: ids of the enclosing if/for/while/try/match blocks of the function.
        self.path: list[int] = []
        #: Statement and call counter: a binding or mutation before a call has a lower order.
        self.order = 0
        self.functions: list[FunctionFacts] = []
        self.classes: list[ClassFacts] = []
        self.lambdas: list[LambdaFacts] = []
        self.main_guard_depth = 0
        #: id of a call -> the targets it is assigned to.
        self.pending_targets: dict[int, list[cst.BaseExpression]] = {}
        #: ids of calls that are returned.
        self.pending_return: set[int] = set()
        #: The frame of the ``for`` being entered (its body pushes it).
        self.frame: LoopFrame | None = None
        #: The qualified name of the call being visited (set before providers see it).
        self.qualified: str | None = None
        self._saved: list[tuple[list[LoopFrame], list[int]]] = []
        #: Calls being visited, innermost last: each, the names it records
        #: (None: none), and its callee's dotted name.
        self._open_calls: list[tuple[cst.Call, set[str] | None, str | None]] = []

    # -- helpers for providers ---------------------------------------------

    def qualify(self, node: cst.BaseExpression) -> str | None:
        return canonical(self.imports.qualify(node))

    def key_of(self, node: cst.BaseExpression) -> Key | None:
        """A stable identity for a loader variable: (owning scope id, dotted name)."""
        if type(node) is cst.Name:
            found = self.scope.lookup(node.value)
            owner = found[0] if found else self.scope.function
            return (id(owner), node.value)
        dotted = dotted_name(node)
        if dotted is not None and dotted.startswith("self.") and self.classes:
            return (id(self.classes[-1]), dotted)
        return None

    def target_key(self, call: cst.Call) -> Key | None:
        """The key of the one variable a call is assigned to."""
        targets = self.pending_targets.get(id(call))
        return self.key_of(targets[0]) if targets and len(targets) == 1 else None

    @property
    def callee(self) -> str | None:
        """The dotted name of the call being visited or left (``a.b.f`` of
        ``a.b.f(x)``; None for another callee): providers' call hooks run
        while it is the innermost open call."""
        return self._open_calls[-1][2]

    @property
    def function(self) -> FunctionFacts | None:
        return self.functions[-1] if self.functions else None

    def _bind_target(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if type(target) is cst.Name:
            self.scope.bind(target.value, value, tuple(self.path), self.order)
        elif type(target) is cst.Tuple or type(target) is cst.List:
            for element in target.elements:
                inner = element.value
                if type(inner) is cst.StarredElement:
                    inner = inner.value
                self._bind_target(inner, None)
        elif type(target) is cst.StarredElement:
            self._bind_target(target.value, None)

    def _mutate(self, name: str, kind: str, value: cst.BaseExpression | None = None, key: str | None = None) -> None:
        found = self.scope.lookup(name)
        owner = found[0] if found else self.scope
        owner.dict_mutations.setdefault(name, []).append(DictMutation(kind, value, key, tuple(self.path), self.order))

    # -- imports and definitions -------------------------------------------

    def visit_Import(self, node: cst.Import) -> None:
        self.imports.add_import(node)
        for alias in node.names:
            name: cst.BaseExpression = alias.asname.name if alias.asname else alias.name
            while type(name) is cst.Attribute:
                name = name.value
            if type(name) is cst.Name:
                self.scope.bind(name.value, None)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.imports.add_import_from(node)
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = alias.asname.name if alias.asname else alias.name
            if type(name) is cst.Name:
                self.scope.bind(name.value, None)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if self.scope.kind == "module":
            self.imports.shadow(node.name.value)
        self.scope.bind(node.name.value, None)
        bases = []
        for arg in node.bases:
            if type(arg.value) is cst.Name and arg.value.value in self.names.classes:
                bases.append(arg.value.value)
            else:
                bases.append(self.qualify(arg.value) or dotted_name(arg.value) or "")
        facts = ClassFacts(node.name.value, node, bases, nested=bool(self.functions))
        self.names.classes.setdefault(node.name.value, facts)
        self.names.class_defs[(id(self.scope), node.name.value)] = facts
        self.classes.append(facts)
        self.scope = Scope("class", self.scope, node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.classes.pop()
        self._leave_scope()

    def _leave_scope(self) -> None:
        assert self.scope.parent is not None  # only class and function scopes are left
        self.scope = self.scope.parent

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.scope.kind == "module":
            self.imports.shadow(node.name.value)
        self.scope.bind(node.name.value, None)
        in_class = self.scope.kind == "class"
        scope = Scope("function", self.scope, node.name.value)
        params = [param.name.value for param in (*node.params.posonly_params, *node.params.params)]
        if in_class and params:
            params = params[1:]  # self/cls is not passed explicitly
        for param in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params):
            scope.bind(param.name.value, None)
        for star in (node.params.star_arg, node.params.star_kwarg):
            if type(star) is cst.Param:
                scope.bind(star.name.value, None)
        facts = FunctionFacts(
            node.name.value,
            node,
            scope,
            nested=bool(self.functions),
            class_name=self.classes[-1].name if in_class and self.classes else None,
            params=params,
        )
        if in_class and self.classes:
            self.classes[-1].methods.setdefault(node.name.value, facts)
        self.names.defs[(id(self.scope), node.name.value)] = facts
        self.functions.append(facts)
        self.names.functions.append(facts)
        self.scope = scope
        self._saved.append((self.loops, self.path))
        self.loops, self.path = [], []

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.functions.pop()
        self._leave_scope()
        self.loops, self.path = self._saved.pop()

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

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self.lambdas.pop()

    def visit_Global(self, node: cst.Global) -> None:
        for item in node.names:
            self.scope.globals_.add(item.name.value)
            self.names.module_scope.bind(item.name.value, None)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        for item in node.names:
            found = self.scope.parent.lookup(item.name.value) if self.scope.parent else None
            if found:
                found[0].bind(item.name.value, None)

    # -- control flow -------------------------------------------------------

    def _leave_block(self) -> None:
        if self.path:
            self.path.pop()

    def visit_If(self, node: cst.If) -> None:
        self.path.append(id(node))
        if _is_main_guard(node.test):
            self.main_guard_depth += 1

    def leave_If(self, original_node: cst.If) -> None:
        self._leave_block()
        if _is_main_guard(original_node.test):
            self.main_guard_depth -= 1

    def visit_Try(self, node: cst.Try) -> None:
        self.path.append(id(node))

    def leave_Try(self, original_node: cst.Try) -> None:
        self._leave_block()

    def visit_Match(self, node: cst.Match) -> None:
        self.path.append(id(node))

    def leave_Match(self, original_node: cst.Match) -> None:
        self._leave_block()

    def visit_For(self, node: cst.For) -> None:
        self._bind_target(node.target, None)
        targets = frozenset(names_in(node.target))
        self.frame = LoopFrame(node, targets, var=node.target.value if type(node.target) is cst.Name else None)
        self.path.append(id(node))

    def visit_For_body(self, node: cst.For) -> None:
        assert self.frame is not None and self.frame.node is node
        self.loops.append(self.frame)

    def leave_For_body(self, node: cst.For) -> None:
        self.loops.pop()

    def leave_For(self, original_node: cst.For) -> None:
        self._leave_block()

    def visit_While(self, node: cst.While) -> None:
        self.path.append(id(node))

    def visit_While_body(self, node: cst.While) -> None:
        self.loops.append(LoopFrame(node, frozenset()))

    def leave_While_body(self, node: cst.While) -> None:
        self.loops.pop()

    def leave_While(self, original_node: cst.While) -> None:
        self._leave_block()

    # -- bindings -----------------------------------------------------------

    def visit_Assign(self, node: cst.Assign) -> None:
        self.order += 1
        single = len(node.targets) == 1
        for target in node.targets:
            t = target.target
            self._bind_target(t, node.value if single and type(t) is cst.Name else None)
            if type(t) is cst.Subscript:
                self._record_setitem(t, node.value)
        if type(node.value) is cst.Call:
            self.pending_targets[id(node.value)] = [t.target for t in node.targets]

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.order += 1
        self._bind_target(node.target, node.value if type(node.target) is cst.Name else None)
        if type(node.value) is cst.Call:
            self.pending_targets[id(node.value)] = [node.target]

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.order += 1
        self._bind_target(node.target, None)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind_target(node.target, None)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._bind_target(node.asname.name, None)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self._bind_target(node.name.name, None)

    def visit_Del(self, node: cst.Del) -> None:
        target = node.target
        if type(target) is cst.Subscript and type(target.value) is cst.Name:
            self._mutate(target.value.value, "other")
        self._bind_target(target, None)

    def visit_Return(self, node: cst.Return) -> None:
        if type(node.value) is cst.Call:
            self.pending_return.add(id(node.value))

    def _record_setitem(self, target: cst.Subscript, value: cst.BaseExpression) -> None:
        if type(target.value) is not cst.Name:
            return
        key = None
        if len(target.slice) == 1 and type(target.slice[0].slice) is cst.Index:
            k = target.slice[0].slice.value
            if type(k) is cst.SimpleString:
                key = str(k.evaluated_value)
        self._mutate(target.value.value, "setitem" if key else "other", value, key)

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

    def __init__(self, cursor: Cursor, facts: Facts) -> None:
        self.cursor = cursor
        self.facts = facts
