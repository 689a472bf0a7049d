"""A module's top-level statements as a main guard would take them: what
each one binds at module level and whether it defines a function or class.

Read only when LL013 builds its fix (rare), so it walks the few statements
it is asked about instead of joining the one traversal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import libcst as cst

from loadlint.cst.walk import find_all, walk
from loadlint.facts.control import names_in
from loadlint.facts.names import NameFacts
from loadlint.facts.resolve import string_value


def is_main_guard(node: cst.CSTNode) -> bool:
    """``if __name__ == "__main__":`` (either side of the ``==``)."""
    if type(node) is not cst.If or type(node.test) is not cst.Comparison or len(node.test.comparisons) != 1:
        return False
    test = node.test
    if type(test.comparisons[0].operator) is not cst.Equal:
        return False
    sides = (test.left, test.comparisons[0].comparator)
    names = {s.value for s in sides if type(s) is cst.Name}
    strings = {string_value(s) for s in sides if type(s) is cst.SimpleString}
    return "__name__" in names and "__main__" in strings


@dataclass(frozen=True)
class TopStatement:
    node: cst.BaseStatement
    #: Names the statement binds in the module's namespace.
    binds: frozenset[str]
    #: A ``def`` or ``class`` at module level, or one nested in its blocks
    #: (``if``/``try``/``with`` bodies): a worker may need it.
    defines: str | None
    #: The module docstring, an import or ``from __future__``: stays first.
    preamble: bool
    #: Calls ``set_start_method(...)`` without ``force=True``: a spawned
    #: worker that runs it again fails ("context has already been set").
    sets_start_method: bool = False


class _Bindings:
    """Module-level bindings of one statement; function, class, lambda and
    comprehension bodies have their own scopes and are not entered."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.defines: str | None = None
        self.start_method = False

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        name = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else ""
        if name == "set_start_method" and not any(
                a.keyword is not None and a.keyword.value == "force" for a in node.args):
            self.start_method = True

    def _define(self, kind: str, name: str) -> bool:
        self.names.add(name)
        if self.defines is None:
            self.defines = f"{kind} {name}"
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return self._define("def", node.name.value)

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return self._define("class", node.name.value)

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def _comprehension(self, node: cst.CSTNode) -> bool:
        return False

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self.names.update(names_in(node.target))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.names.update(names_in(node.target))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.names.update(names_in(node.target))

    def visit_For(self, node: cst.For) -> None:
        self.names.update(names_in(node.target))

    def visit_AsName(self, node: cst.AsName) -> None:
        if isinstance(node.name, cst.BaseExpression):
            self.names.update(names_in(node.name))

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self.names.update(names_in(node.target))

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            if alias.asname is None:
                self.names.add(cst.Module([]).code_for_node(alias.name).split(".")[0])

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if not isinstance(node.names, cst.ImportStar):
            self.names.update(a.name.value for a in node.names if a.asname is None and type(a.name) is cst.Name)


def _preamble(node: cst.BaseStatement, first: bool) -> bool:
    if type(node) is not cst.SimpleStatementLine:
        return False
    small = node.body
    if all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in small):
        return True
    return first and len(small) == 1 and type(small[0]) is cst.Expr and isinstance(
        small[0].value, (cst.SimpleString, cst.ConcatenatedString))


def top_statements(body: Sequence[cst.BaseStatement]) -> list[TopStatement]:
    out = []
    for i, node in enumerate(body):
        visitor = _Bindings()
        walk(node, visitor)
        out.append(TopStatement(node, frozenset(visitor.names), visitor.defines, _preamble(node, i == 0),
                                visitor.start_method))
    return out


def first_holding(body: Sequence[cst.BaseStatement], nodes: Sequence[cst.CSTNode]) -> int | None:
    """The index of the first top-level statement that holds one of
    ``nodes`` (loops and calls: what starts workers)."""
    wanted = {id(n) for n in nodes}
    kinds = {type(n) for n in nodes}
    for i, statement in enumerate(body):
        if any(id(found) in wanted for kind in kinds for found in find_all(statement, kind)):
            return i
    return None


def globals_read(names: NameFacts) -> dict[str, str]:
    """Module-level names that functions (methods and nested ones included)
    and lambdas read when they run, each with the first reader's name: a
    worker runs them in a process where only the unguarded module exists."""
    out: dict[str, str] = {}
    readers = [(fn.names_used - {fn.name}, fn.scope, f"{fn.class_name}.{fn.name}" if fn.class_name else fn.name)
               for fn in names.functions]
    readers += [(lam.names_used - lam.params, lam.scope, "a lambda") for lam in names.lambdas.values()]
    for used, scope, who in readers:
        for name in sorted(used):
            found = scope.lookup(name)
            if found is not None and found[0].kind == "module":
                out.setdefault(name, who)
    return out
