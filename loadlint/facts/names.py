"""Imports and names: the definitions, lambdas and name reads of a module.

The ``Cursor`` (``loadlint.facts.cursor``) fills these while it tracks scopes;
the other providers and the rules look definitions up here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from loadlint.facts.resolve import ImportTable, Scope

#: A stable identity for a loader variable: (id of its owning scope, dotted name).
Key = tuple[int, str]


@dataclass(eq=False)
class LoopFrame:
    """One ``for``/``while`` body the traversal is inside of."""

    node: cst.For | cst.While
    targets: frozenset[str]
    #: Loader keys this loop iterates directly.
    iterates: list[Key] = field(default_factory=list)
    var: str | None = None
    #: The loop variable when it takes each loader of a container literal in
    #: turn (``for loader in loaders.values()``): one pass per loader, not a
    #: repetition of that variable's loop.
    spreads: str | None = None


@dataclass(eq=False)
class FunctionFacts:
    """One ``def``: where it is, its parameters and the names it reads."""

    name: str
    node: cst.FunctionDef
    scope: Scope
    nested: bool
    class_name: str | None
    params: list[str] = field(default_factory=list)
    names_used: set[str] = field(default_factory=set)


@dataclass(eq=False)
class LambdaFacts:
    """One lambda and the names it reads."""

    node: cst.Lambda
    #: The scope the lambda is written in (its free names resolve there).
    scope: Scope
    params: set[str] = field(default_factory=set)
    names_used: set[str] = field(default_factory=set)


@dataclass(eq=False)
class ClassFacts:
    """One ``class``: its bases (qualified, or a local class's name) and methods."""

    name: str
    node: cst.ClassDef
    bases: list[str]
    nested: bool
    methods: dict[str, FunctionFacts] = field(default_factory=dict)


@dataclass
class NameFacts:
    """What the names of one module refer to."""

    imports: ImportTable = field(default_factory=ImportTable)
    module_scope: Scope = field(default_factory=lambda: Scope("module", None))
    #: Classes by name (the first definition wins).
    classes: dict[str, ClassFacts] = field(default_factory=dict)
    functions: list[FunctionFacts] = field(default_factory=list)
    #: Every ``def``, keyed by (id of the scope it binds in, name).
    defs: dict[Key, FunctionFacts] = field(default_factory=dict)
    #: Every ``class``, keyed the same way (local classes are not picklable).
    class_defs: dict[Key, ClassFacts] = field(default_factory=dict)
    #: Every lambda, by id of its node.
    lambdas: dict[int, LambdaFacts] = field(default_factory=dict)
    #: ids of calls with a lambda anywhere inside their arguments.
    calls_with_lambda: set[int] = field(default_factory=set)
    #: Names read inside the arguments of constructor-like calls (a
    #: capitalised callee, or DataLoader itself), by id of the call.
    call_names: dict[int, set[str]] = field(default_factory=dict)

    def definition(self, name: str, scope: Scope) -> FunctionFacts | ClassFacts | None:
        """The ``def`` or ``class`` a name refers to from ``scope``, when it is
        bound exactly once (by that definition)."""
        found = scope.lookup(name)
        if found is None:
            return None
        owner, bindings = found
        if len(bindings) != 1:
            return None
        key = (id(owner), name)
        return self.defs.get(key) or self.class_defs.get(key)

    def function_named(self, name: str) -> FunctionFacts | None:
        """The first top-level or method ``def`` with this name."""
        for fn in self.functions:
            if fn.name == name and not fn.nested:
                return fn
        return None

    def class_bases(self, cls: ClassFacts, depth: int = 0) -> set[str]:
        """Qualified bases of a local class, following local base classes."""
        out: set[str] = set()
        for base in cls.bases:
            out.add(base)
            if base in self.classes and depth < 10 and base != cls.name:
                out |= self.class_bases(self.classes[base], depth + 1)
        return out

    def class_hierarchy(self, cls: ClassFacts) -> list[ClassFacts]:
        """The class and its local bases, nearest first."""
        out = [cls]
        queue = list(cls.bases)
        while queue and len(out) < 20:
            name = queue.pop(0)
            base = self.classes.get(name)
            if base is not None and base not in out:
                out.append(base)
                queue.extend(base.bases)
        return out

    def method_of(self, cls: ClassFacts, name: str) -> FunctionFacts | None:
        """A method as the class resolves it through its local bases."""
        for klass in self.class_hierarchy(cls):
            if name in klass.methods:
                return klass.methods[name]
        return None

    def bound_names(self) -> set[str]:
        """Every name bound at module level or in a function."""
        names = set(self.module_scope.bindings) | set(self.imports.names)
        for fn in self.functions:
            names |= set(fn.scope.bindings)
        return names
