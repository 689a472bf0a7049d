"""Where a loader's dataset comes from: the module-level classes and
functions it may be built by, and whether every value it may be was traced
(rules/importable.py reads it to decide whether workers can import it)."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from loadlint.facts.datasets import DatasetFacts, helper, in_memory_value, passed_for
from loadlint.facts.loaders import LoaderCall
from loadlint.facts.names import ClassFacts, FunctionFacts, NameFacts
from loadlint.facts.resolve import Scope, follow_name

_MAX_DEPTH = 12


@dataclass
class DatasetSources:
    """What a loader's dataset may be built from, as far as it is traced."""

    #: Module-level classes and functions of this module it may be built by.
    local: list[str] = field(default_factory=list)
    #: Every value it may be was traced to a construction (an import, a
    #: local definition, a value in memory); False for a parameter no call
    #: of this module passes, an attribute, a run-time key's container entry...
    traced: bool = True


def dataset_sources(names: NameFacts, facts: DatasetFacts, call: LoaderCall) -> DatasetSources:
    """Where the loader's dataset comes from: through names bound once, the
    calls of this module's helpers, their returns, method calls on a traced
    value (``load_dataset(...).map(...)``) and indexing (``ds["train"]``,
    ``{"train": a, "test": b}[split]``, each entry of a literal)."""
    out = DatasetSources()
    expr = call.expr("dataset")
    if expr is None:
        out.traced = False
    else:
        _sources(names, facts, expr, call.scope_of("dataset"), out, 0)
    return out


def _sources(
    names: NameFacts, facts: DatasetFacts, expr: cst.BaseExpression, scope: Scope | None, out: DatasetSources, depth: int
) -> None:
    if depth > _MAX_DEPTH or scope is None:
        out.traced = False
        return
    if in_memory_value(expr, scope, names):
        return
    if type(expr) is cst.Name:
        definition = names.definition(expr.value, scope)
        if isinstance(definition, (ClassFacts, FunctionFacts)):
            _local(definition, out)
            return
        target, owner = follow_name(expr, scope)
        if target is not expr:
            _sources(names, facts, target, owner, out, depth + 1)
            return
        passed = passed_for(names, facts, expr.value, scope)
        if not passed and names.imports.qualify(expr) is None:
            out.traced = False
        for value, value_scope in passed:
            _sources(names, facts, value, value_scope, out, depth + 1)
        return
    if type(expr) is cst.Call:
        func = expr.func
        definition = names.definition(func.value, scope) if type(func) is cst.Name else None
        built_by = helper(names, expr, scope)
        if isinstance(definition, ClassFacts):
            _local(definition, out)
        elif built_by is not None:
            returned = facts.returns.get(built_by, [])
            if not returned or any(value is None for value in returned):
                out.traced = False
            for returned_value in returned:
                if returned_value is not None:
                    _sources(names, facts, returned_value, built_by.scope, out, depth + 1)
        elif names.imports.qualify(func) is None:
            if type(func) is cst.Attribute:
                _sources(names, facts, func.value, scope, out, depth + 1)  # a method of a traced value
            else:
                out.traced = False
        return
    if type(expr) is cst.Subscript:
        container = expr.value
        if isinstance(container, (cst.Dict, cst.List, cst.Tuple)):
            for element in container.elements:
                if isinstance(element, (cst.StarredDictElement, cst.StarredElement)):
                    out.traced = False
                else:
                    _sources(names, facts, element.value, scope, out, depth + 1)
        else:
            _sources(names, facts, container, scope, out, depth + 1)
        return
    out.traced = False


def _local(definition: ClassFacts | FunctionFacts, out: DatasetSources) -> None:
    if definition.nested:
        out.traced = False  # LL007's: it cannot be pickled in any module
    elif definition.name not in out.local:
        out.local.append(definition.name)
