"""The cursor's scopes: where names are bound and what they refer to.

Imports, definitions (functions, classes, lambdas) and bindings, recorded
on the way down for the value resolver (``loadlint.facts.resolve``).  A part
of ``loadlint.facts.cursor.Cursor``: the traversal runs its hooks before
the providers'.
"""

from __future__ import annotations

import libcst as cst

from loadlint.facts.names import ClassFacts, FunctionFacts, Key, LambdaFacts, NameFacts
from loadlint.facts.resolve import DictMutation, Point, Scope, canonical, dotted_name, string_value


def constant_index(node: cst.Subscript) -> str | int | None:
    """The key of ``x["train"]`` or ``x[0]``: a string or a non-negative
    integer written as a literal; None for anything else."""
    if len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Index:
        return None
    index = node.slice[0].slice.value
    if type(index) is cst.SimpleString:
        value = string_value(index)
        return value if isinstance(value, str) else None
    if type(index) is cst.Integer:
        return int(index.value, 0)
    return None


def member(base: str, index: str | int) -> str:
    """The key name of a container's member: ``loaders['train']``."""
    return f"{base}[{index!r}]"


def literal_members(node: cst.BaseExpression) -> list[tuple[str | int, cst.BaseExpression]] | None:
    """The members of a dict, list or tuple literal by their constant key or
    position; None when one is not known (``**rest``, ``*rest``, a key
    that is not a literal string)."""
    if type(node) is cst.Dict:
        out: list[tuple[str | int, cst.BaseExpression]] = []
        for element in node.elements:
            if type(element) is not cst.DictElement or type(element.key) is not cst.SimpleString:
                return None
            key = string_value(element.key)
            if not isinstance(key, str) or any(k == key for k, _ in out):
                return None
            out.append((key, element.value))
        return out
    if type(node) is cst.List or type(node) is cst.Tuple:
        if any(type(e) is not cst.Element for e in node.elements):
            return None
        return [(i, e.value) for i, e in enumerate(node.elements)]
    return None


class ScopeCursor:
    """The scope the traversal is in, the definitions around it, and the
    bindings and dict changes made so far."""

    #: ids of the enclosing if/for/while/try/match blocks of the function
    #: (kept by ``FlowCursor``): a binding records where it was made.
    path: list[int]

    def __init__(self) -> None:
        self.names = NameFacts()
        self.imports = self.names.imports
        self.scope: Scope = self.names.module_scope
        #: Statement and call counter: a binding or mutation before a call has a lower order.
        self.order = 0
        self.functions: list[FunctionFacts] = []
        self.classes: list[ClassFacts] = []
        self.lambdas: list[LambdaFacts] = []
        self._tick = 0

    def point(self) -> Point:
        """The program point of the node being visited: one clock for every
        kind of value's bindings, changes and reads (``resolve.reaches``)."""
        self._tick += 1
        return self._tick, id(self.scope), self.loop_ids(), tuple(self.path)

    def loop_ids(self) -> tuple[int, ...]:
        """The loops around the node in its function (the cursor's flow part knows them)."""
        return ()

    def qualify(self, node: cst.BaseExpression) -> str | None:
        return canonical(self.imports.qualify(node))

    def key_of(self, node: cst.BaseExpression) -> Key | None:
        """A stable identity for a loader variable: (owning scope id, dotted name)."""
        if type(node) is cst.Name:
            found = self.scope.lookup(node.value)
            owner = found[0] if found else self.scope.function
            return (id(owner), node.value)
        if type(node) is cst.Subscript:
            # ``loaders["train"]``: a member of a container, by its constant key.
            index = constant_index(node)
            base = self.key_of(node.value) if index is not None else None
            return None if base is None or index is None else (base[0], member(base[1], index))
        dotted = dotted_name(node)
        if type(node) is cst.Attribute and (dotted is None or not dotted.startswith("self.")):
            # ``holder.loader``, ``phases["train"].loader``: an attribute of a variable or member.
            base = self.key_of(node.value) if type(node.value) in (cst.Name, cst.Subscript) else None
            return None if base is None else (base[0], f"{base[1]}.{node.attr.value}")
        if dotted is not None and dotted.startswith("self.") and self.classes:
            return (id(self.classes[-1]), dotted)
        return None

    @property
    def function(self) -> FunctionFacts | None:
        return self.functions[-1] if self.functions else None

    def _bind_target(self, target: cst.BaseExpression, value: cst.BaseExpression | None,
                     unpacks: cst.Call | None = None, part: tuple[int, int] | None = None,
                     element: cst.BaseExpression | None = None) -> None:
        if type(target) is cst.Name:
            self.scope.bind(target.value, value, tuple(self.path), self.order, self.point(), unpacks, part, element)
        elif type(target) is cst.Tuple or type(target) is cst.List:
            items = target.elements
            # Positions count only without a starred target; a literal's
            # members pair with the targets only when as many and unstarred.
            plain = not any(type(item.value) is cst.StarredElement for item in items)
            members = value.elements if plain and isinstance(value, (cst.Tuple, cst.List)) else None
            if members is not None and (len(members) != len(items) or any(type(m) is cst.StarredElement for m in members)):
                members = None
            for i, item in enumerate(items):
                inner = item.value
                if type(inner) is cst.StarredElement:
                    inner = inner.value
                self._bind_target(inner, None, value if type(value) is cst.Call else None,
                                  (i, len(items)) if plain and type(value) is cst.Call else None,
                                  members[i].value if members is not None else None)
        elif type(target) is cst.StarredElement:
            self._bind_target(target.value, None)

    def _mutate(self, name: str, kind: str, value: cst.BaseExpression | None = None, key: str | None = None) -> None:
        found = self.scope.lookup(name)
        owner = found[0] if found else self.scope
        owner.dict_mutations.setdefault(name, []).append(DictMutation(kind, value, key, tuple(self.path), self.order, self.point()))

    def _record_setitem(self, target: cst.Subscript, value: cst.BaseExpression) -> None:
        if type(target.value) is not cst.Name:
            return
        key = None
        if len(target.slice) == 1 and type(target.slice[0].slice) is cst.Index:
            k = target.slice[0].slice.value
            if type(k) is cst.SimpleString:
                key = str(string_value(k))
        self._mutate(target.value.value, "setitem" if key else "other", value, key)

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

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.functions.pop()
        self._leave_scope()

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
