"""Handles a Dataset's ``__init__`` opens and keeps on ``self`` (an
``lmdb`` environment, an ``h5py`` file, a file object): pickling the dataset
for workers started with spawn or forkserver fails on them (LL014)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst

from loadlint.facts.datasets import DatasetFacts
from loadlint.facts.names import ClassFacts, NameFacts
from loadlint.facts.resolve import canonical, dotted_name, string_value

#: Bases a dataset may have without hiding how it pickles (another base,
#: imported, may define ``__getstate__``).
_PLAIN_BASES = {"torch.utils.data.Dataset", "torch.utils.data.IterableDataset", "object", ""}
#: Methods with which a class decides what pickling keeps.
_PICKLE_METHODS = ("__getstate__", "__reduce__", "__reduce_ex__")


@dataclass(frozen=True)
class Handle:
    """An unpicklable handle a dataset's ``__init__`` stores on ``self``."""

    cls: str
    attr: str
    #: What it is, for the message: "an `lmdb` environment".
    what: str
    #: The call written, shortened: ``lmdb.open(...)``.
    written: str
    #: What pickling raises, as torch reports it.
    error: str
    node: cst.Call


def _file_type(call: cst.Call) -> str | None:
    """The ``io`` class ``open(...)`` returns for a literal mode; None when
    the mode is not written as a literal."""
    mode: cst.BaseExpression | None = None
    for i, arg in enumerate(call.args):
        if arg.keyword is not None and arg.keyword.value == "mode" or arg.keyword is None and i == 1:
            mode = arg.value
    if mode is None:
        return "TextIOWrapper"
    if type(mode) is not cst.SimpleString:
        return None
    text = str(string_value(mode))
    if "b" not in text:
        return "TextIOWrapper"
    if "+" in text:
        return "BufferedRandom"
    return "BufferedReader" if "r" in text else "BufferedWriter"


def _handle(names: NameFacts, cls: str, attr: str, call: cst.Call) -> Handle | None:
    func = call.func
    qualified = canonical(names.imports.qualify(func))
    written = f"{dotted_name(func)}(...)"
    if qualified == "lmdb.open":
        return Handle(cls, attr, "an `lmdb` environment", written, "cannot pickle 'Environment' object", call)
    if qualified == "h5py.File":
        return Handle(cls, attr, "an open `h5py` file", written, "h5py objects cannot be pickled", call)
    builtin = type(func) is cst.Name and func.value == "open" and qualified is None and (
        names.module_scope.lookup("open") is None)
    if builtin or qualified == "io.open":
        kind = _file_type(call)
        error = f"cannot pickle '_io.{kind}' object" if kind else "cannot pickle '_io...' object"
        return Handle(cls, attr, "an open file", written, error, call)
    return None


def stored_handle(names: NameFacts, datasets: DatasetFacts, cls: ClassFacts) -> Handle | None:
    """The first handle the class's ``__init__`` stores on ``self`` (the
    only assignment of that attribute there), unless the class or a base
    says how it pickles, or a base is not known."""
    if any(names.method_of(cls, m) is not None for m in _PICKLE_METHODS):
        return None
    hierarchy = names.class_hierarchy(cls)
    local = {k.name for k in hierarchy}
    if any(base not in local and canonical(base) not in _PLAIN_BASES for k in hierarchy for base in k.bases):
        return None
    init = names.method_of(cls, "__init__")
    if init is None or init.class_name is None:
        return None
    for (owner, attr), assigned in datasets.attr_values.items():
        if owner != init.class_name:
            continue
        in_init = [value for fn, value in assigned if fn is init]
        if len(in_init) != 1 or type(in_init[0]) is not cst.Call:
            continue  # also set to something else (``None`` once closed): undecided
        found = _handle(names, init.class_name, attr, in_init[0])
        if found is not None:
            return found
    return None


def handle_classes(names: NameFacts, datasets: DatasetFacts) -> dict[str, dict[str, Any]]:
    """By name, the module-level classes that keep a handle (a summary
    entry: a loader in another module reads it)."""
    out: dict[str, dict[str, Any]] = {}
    for name, cls in names.classes.items():
        found = None if cls.nested else stored_handle(names, datasets, cls)
        if found is not None:
            out[name] = {"cls": found.cls, "attr": found.attr, "what": found.what, "written": found.written,
                         "error": found.error}
    return out
