"""Whether a loader's dataset is a loading pipeline at all: the one test
that the rules about loading work read (LL201 suggests no workers where it
is not).

It is not one when every value the dataset may be is held in memory (a
``TensorDataset``, a range or tensor of indices, literals, a local class
that only indexes such values, an object ``torch.load`` or ``pickle.load``
read whole, or an item of one: a cached dataset), pads pre-tokenized rows
(``loadlint.facts.pretokenized``), or is a live source: a dataset fed by a
generator method of the object that builds the loader (lightning-bolts'
``ExperienceSourceDataset(self.train_batch)``, which steps the environment
with the policy being trained).  Workers would run frozen copies of that
object.

A dataset name is followed through each of its bindings that reach the
call (a name bound to ``TensorDataset(...)`` in two branches; in the else
branch the loader is built in, only the binding there; ``a, b = x, y``),
a parameter through the calls
of this module that pass it, and a helper of this module through its
returns (``gen_tensor_dataset(features)``; ``features, dataset =
convert(...)``: the second member of each pair it returns).  A value that
is not traced keeps the loader a pipeline.
"""

from __future__ import annotations

from typing import Sequence

import libcst as cst

from loadlint.cst.walk import find_all
from loadlint.facts.batches import index_value
from loadlint.facts.datasets import (
    DatasetFacts, held_in_memory, helper, passed_for,
)
from loadlint.facts.loaders import LoaderCall
from loadlint.facts.names import NameFacts
from loadlint.facts.pretokenized import deserializing, pretokenized
from loadlint.facts.resolve import MISSING, Binding, Point, Scope, canonical, follow_name, reaching

_MAX_DEPTH = 12
_TENSOR_DATASET = "torch.utils.data.TensorDataset"
#: Methods of an index tensor that give a part of it (a rank's share).
_PARTS = frozenset({"split", "chunk", "tensor_split"})

Value = tuple[cst.BaseExpression, Scope]


def loading_pipeline(names: NameFacts, facts: DatasetFacts, call: LoaderCall) -> bool:
    """False when workers have no loading work to take over (see the module's docstring)."""
    return not (in_memory_dataset(names, facts, call) or pretokenized(names, facts, call)
                or live_generator(names, facts, call) is not None)


def in_memory_dataset(names: NameFacts, facts: DatasetFacts, call: LoaderCall) -> bool:
    """Every value the dataset may be is held in memory.  Apart from a
    ``TensorDataset``, a custom ``collate_fn`` may do the heavy work, so it
    keeps the loader out."""
    known = facts.in_memory.get(id(call))
    if known is not None and known[0] is call:
        return known[1]
    answer = _in_memory(names, facts, call)
    facts.in_memory[id(call)] = (call, answer)
    return answer


def _in_memory(names: NameFacts, facts: DatasetFacts, call: LoaderCall) -> bool:
    if call.subclass is not None and call.subclass.startswith("torch_geometric."):
        # Graph datasets: 112 of PyG's 114 built-in ones are InMemoryDataset,
        # read through ``.shuffle()`` and slices that are not followed here.
        return True
    expr, scope = call.expr("dataset"), call.scope_of("dataset")
    if expr is None or scope is None:
        return False
    values = dataset_values(names, facts, expr, scope, call.point)
    if not values:
        return False
    if all(tensor_dataset(names, value) for value, _ in values):
        return True
    collate = call.value("collate_fn")
    if collate is not MISSING and collate is not None:
        return False
    if _index(names, facts, expr, scope, frozenset()):
        return True
    return all(tensor_dataset(names, value) or deserializing(names, value) or held_in_memory(names, facts, value, owner)
               for value, owner in values)


def memory_dataset(names: NameFacts, facts: DatasetFacts, expr: cst.BaseExpression, scope: Scope) -> bool:
    """A dataset passed or returned to another module, held in memory: each
    of its values a ``TensorDataset`` or deserialized whole."""
    values = dataset_values(names, facts, expr, scope)
    return bool(values) and all(tensor_dataset(names, v) or deserializing(names, v) for v, _ in values)


def memory_members(
    names: NameFacts, facts: DatasetFacts, returns: Sequence[cst.BaseExpression | None], scope: Scope
) -> dict[int, list[int]]:
    """By length, the positions of a function's returned tuple literals of
    that length at which every such return holds a dataset in memory."""
    by_length: dict[int, list[cst.Tuple | cst.List]] = {}
    for value in returns:
        if isinstance(value, (cst.Tuple, cst.List)) and not any(type(e) is cst.StarredElement for e in value.elements):
            by_length.setdefault(len(value.elements), []).append(value)
    out: dict[int, list[int]] = {}
    for length, literals in by_length.items():
        held = [i for i in range(length) if all(memory_dataset(names, facts, t.elements[i].value, scope) for t in literals)]
        if held:
            out[length] = held
    return out


def tensor_dataset(names: NameFacts, value: cst.BaseExpression) -> bool:
    """``TensorDataset(...)``, under any import of it."""
    return type(value) is cst.Call and canonical(names.imports.qualify(value.func)) == _TENSOR_DATASET


def _index(
    names: NameFacts, facts: DatasetFacts, value: cst.BaseExpression, scope: Scope, seen: frozenset[str]
) -> bool:
    """A range or a tensor of indices: ``range(t.size(0))`` (whatever its
    bounds, it is built once), ``mask.nonzero().view(-1)``, a rank's part
    of one (``idx.split(n)[rank]``)."""
    if len(seen) > _MAX_DEPTH:
        return False
    if type(value) is cst.Call and type(value.func) is cst.Name and value.func.value == "range":
        return scope.lookup("range") is None
    if type(value) is cst.Subscript and type(value.value) is cst.Call and type(value.value.func) is cst.Attribute:
        if value.value.func.attr.value in _PARTS:
            value = value.value.func.value
    if type(value) is cst.Name:
        if value.value in seen:
            return True  # ``idx = idx.split(n)[rank]``: its other values decide
        found = dataset_values(names, facts, value, scope)
        return bool(found) and all(_index(names, facts, v, s, seen | {value.value}) for v, s in found)
    return index_value(value, scope, names.imports)


def dataset_values(
    names: NameFacts, facts: DatasetFacts, expr: cst.BaseExpression, scope: Scope, point: Point | None = None
) -> list[Value]:
    """The expressions the dataset may be, each with its scope; empty when
    one of them is not traced (see the module's docstring).  With the
    program point of the read, a name is the bindings that reach it."""
    out: list[Value] = []
    return out if _values(names, facts, expr, scope, out, set(), 0, point) else []


def _values(
    names: NameFacts, facts: DatasetFacts, expr: cst.BaseExpression, scope: Scope | None,
    out: list[Value], seen: set[tuple[int, str, Point | None]], depth: int, point: Point | None = None,
) -> bool:
    if depth > _MAX_DEPTH or scope is None:
        return False
    if type(expr) is cst.Name:
        found = scope.lookup(expr.value)
        if found is None:
            return False
        owner, bindings = found
        key = (id(owner), expr.value, point)
        if key in seen:
            return True  # ``a = b; b = a`` in a loop: its other values are followed already
        seen.add(key)
        # A binding that cannot reach the read (``del cached`` after it) is no value of it.
        seen_here = bindings if point is None else reaching(bindings, point)
        if seen_here and all(b.value is not None or b.element is not None or b.part is not None for b in seen_here):
            # A binding's value is read where the binding is made.
            return all(_bound(names, facts, b, owner, out, seen, depth + 1) for b in seen_here)
        passed = passed_for(names, facts, expr.value, scope)
        return bool(passed) and all(_values(names, facts, v, s, out, seen, depth + 1) for v, s in passed)
    if type(expr) is cst.Subscript and isinstance(expr.value, (cst.Dict, cst.List, cst.Tuple)):
        # ``{"train": train_ds, "test": test_ds}[split]``: any of its entries.
        entries = [e.value for e in expr.value.elements if isinstance(e, (cst.DictElement, cst.Element))]
        return len(entries) == len(expr.value.elements) and bool(entries) and all(
            _values(names, facts, entry, scope, out, seen, depth + 1, point) for entry in entries
        )
    built_by = helper(names, expr, scope)
    if built_by is not None:
        returned = facts.returns.get(built_by, [])
        return bool(returned) and all(
            value is not None and _values(names, facts, value, built_by.scope, out, seen, depth + 1)
            for value in returned
        )
    loaded = _deserialized(names, facts, expr, scope, point, depth)
    out.append((loaded, scope) if loaded is not None else (expr, scope))
    return True


def _bound(
    names: NameFacts, facts: DatasetFacts, binding: Binding, owner: Scope,
    out: list[Value], seen: set[tuple[int, str, Point | None]], depth: int,
) -> bool:
    """The values one binding gives its name: its value, a literal's member
    (``a, b = x, y``), or the member at its position of the tuple literals
    of that length a helper of this module returns (``features, dataset =
    convert(...)``; a return of another shape is not what is unpacked)."""
    if binding.value is not None:
        return _values(names, facts, binding.value, owner, out, seen, depth, binding.point)
    if binding.element is not None:
        return _values(names, facts, binding.element, owner, out, seen, depth, binding.point)
    built_by = helper(names, binding.unpacks, owner) if binding.unpacks is not None else None
    if built_by is None or binding.part is None:
        return False
    position, length = binding.part
    members = [m for m in facts.returns.get(built_by, []) if isinstance(m, (cst.Tuple, cst.List))
               and len(m.elements) == length and not any(type(e) is cst.StarredElement for e in m.elements)]
    return bool(members) and all(
        _values(names, facts, m.elements[position].value, built_by.scope, out, seen, depth) for m in members
    )


def _deserialized(
    names: NameFacts, facts: DatasetFacts, expr: cst.BaseExpression, scope: Scope, point: Point | None, depth: int,
) -> cst.Call | None:
    """The ``torch.load(...)`` (or ``pickle.load``) an item of which ``expr``
    is (``cached["dataset"]``, ``torch.load(f)[0]``), when every value of the
    name it indexes is one; None otherwise."""
    base = expr
    while type(base) is cst.Subscript:
        base = base.value
    if base is expr:
        return None
    found: list[Value] = []
    if not _values(names, facts, base, scope, found, set(), depth + 1, point) or not found:
        return None
    loads = [value for value, _ in found if deserializing(names, value)]
    return loads[0] if len(loads) == len(found) and type(loads[0]) is cst.Call else None


def live_generator(names: NameFacts, facts: DatasetFacts, call: LoaderCall) -> str | None:
    """``self.<method>`` when the dataset is built from a generator method
    of the class that builds the loader (directly, through a name or through
    a ``self.<attr>`` the class sets once)."""
    if call.class_name is None:
        return None
    expr = call.expr("dataset")
    target, _ = follow_name(expr, call.scope_of("dataset")) if expr is not None else (None, None)
    if type(target) is cst.Attribute and type(target.value) is cst.Name and target.value.value == "self":
        stored = [value for _, value in facts.attr_values.get((call.class_name, target.attr.value), [])
                  if not (type(value) is cst.Name and value.value == "None")]  # ``self.dataset = None`` first
        target = stored[0] if len(stored) == 1 else None
    cls = names.classes.get(call.class_name)
    if type(target) is not cst.Call or cls is None:
        return None
    for arg in target.args:
        value = arg.value
        if type(value) is cst.Attribute and type(value.value) is cst.Name and value.value.value == "self":
            method = names.method_of(cls, value.attr.value)
            if method is not None and next(iter(find_all(method.node, cst.Yield)), None) is not None:
                return f"self.{value.attr.value}"
    return None
