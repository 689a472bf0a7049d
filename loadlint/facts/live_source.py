"""Whether a loader's dataset is fed live by the training loop (a replay
buffer the loop keeps filling): workers would each read a frozen copy, so
LL201 neither suggests nor writes workers for it."""

from __future__ import annotations

import libcst as cst

from loadlint.cst.walk import find_all
from loadlint.facts.datasets import DatasetFacts, dataset_class, is_iterable_dataset
from loadlint.facts.loaders import LoaderCall
from loadlint.facts.names import FunctionFacts, NameFacts
from loadlint.facts.resolve import follow_name

#: Methods that change a container in place (a replay buffer, a queue).
_MUTATORS = frozenset({"append", "appendleft", "extend", "extendleft", "insert", "push", "put", "put_nowait", "add", "update"})


def live_source(names: NameFacts, datasets: DatasetFacts, call: LoaderCall) -> tuple[str, str, str] | None:
    """(class, object, mutating method) when the loader's dataset is a local
    IterableDataset that never asks which worker it runs in and whose
    ``__iter__`` reads an object passed to its constructor that the code
    building the loader keeps changing (in the same function, or in any
    method of the same class for a ``self.`` attribute).  Workers would each
    sample a frozen copy of that object.  Conservative: None when unsure."""
    _, cls = dataset_class(names, call)
    if cls is None or is_iterable_dataset(names, call) is not True:
        return None
    init, iterate = names.method_of(cls, "__init__"), names.method_of(cls, "__iter__")
    if init is None or iterate is None:
        return None
    callers = datasets.worker_info_callers
    if any(fn in callers for klass in names.class_hierarchy(cls) for fn in klass.methods.values()):
        return None
    ctor = call.expr("dataset")
    ctor = follow_name(ctor, call.scope)[0] if ctor is not None else None
    if type(ctor) is not cst.Call:
        return None
    read = {a.attr.value for a in find_all(iterate.node, cst.Attribute) if _is_self(a.value)}
    for attr, param in _stored_params(init).items():
        arg = _argument(ctor, init.params, param) if attr in read else None
        target = _dotted(arg) if arg is not None else None
        method = _mutation(names, call, target) if target is not None else None
        if target is not None and method is not None:
            return cls.name, target, method
    return None


def _stored_params(init: FunctionFacts) -> dict[str, str]:
    """``self.attr = param`` assignments of ``__init__``: attr -> param."""
    out = {}
    for node in find_all(init.node, cst.Assign):
        if len(node.targets) != 1:
            continue
        target, value = node.targets[0].target, node.value
        if (
            type(target) is cst.Attribute and _is_self(target.value)
            and type(value) is cst.Name and value.value in init.params
        ):
            out[target.attr.value] = value.value
    return out


def _is_self(expr: cst.BaseExpression) -> bool:
    return type(expr) is cst.Name and expr.value == "self"


def _argument(ctor: cst.Call, params: list[str], param: str) -> cst.BaseExpression | None:
    for arg in ctor.args:
        if arg.keyword is not None and arg.keyword.value == param:
            return arg.value
    positional = [a for a in ctor.args if a.keyword is None and not a.star]
    index = params.index(param)
    return positional[index].value if index < len(positional) else None


def _dotted(expr: cst.BaseExpression) -> str | None:
    if type(expr) is cst.Name:
        return expr.value
    if type(expr) is cst.Attribute and type(expr.value) is cst.Name and expr.value.value == "self":
        return f"self.{expr.attr.value}"
    return None


def _mutation(names: NameFacts, call: LoaderCall, target: str) -> str | None:
    """The mutating method called on ``target`` where the loader is built."""
    if call.function is None:
        return None
    if target.startswith("self."):
        cls = names.classes.get(call.class_name) if call.class_name else None
        scopes = list(cls.methods.values()) if cls is not None else []
    else:
        scopes = [f for f in names.functions if f.name == call.function and f.class_name == call.class_name]
    for fn in scopes:
        for node in find_all(fn.node, cst.Call):
            if type(node.func) is not cst.Attribute:
                continue
            owner = _dotted(node.func.value)
            if owner == target and node.func.attr.value in _MUTATORS:
                return node.func.attr.value
    return None
