"""Pre-tokenized Hugging Face datasets: rows of token ids already in memory,
padded into a batch by a collate function.

Measured (benchmarks/pretokenized.py, ``loadlint verify``): indexing such a
dataset and padding a batch of 8 costs about 2 ms in the training process,
and workers made it slower, not faster (the rows are cheap; sending each
batch back from a worker is not).  LL201 stays silent there, as Hugging
Face's ``Trainer`` does with its default of 0 workers.

The test is conservative: the ``collate_fn`` is a ``transformers`` data
collator (``DataCollatorWithPadding(...)``, ``default_data_collator``...)
or a local function that only returns ``<tokenizer>.pad(...)`` of its
argument, and the dataset is a split of a dataset dictionary
(``tokenized_datasets["train"]``, the key a string or a choice of two) or
a ``.map(...)`` result, in a module that sets no on-the-fly transform
(``set_transform``/``with_transform``).  A name bound more than once
qualifies when each of its bindings does (Hugging Face's example scripts
bind the collator in two branches and ``eval_dataset`` twice).
"""

from __future__ import annotations

from typing import Callable

import libcst as cst

from loadlint.facts.datasets import DatasetFacts
from loadlint.facts.loaders import LoaderCall
from loadlint.facts.names import NameFacts
from loadlint.facts.resolve import Scope, follow_name

_ROW_METHODS = frozenset({"map", "with_format", "shuffle", "select", "filter", "remove_columns", "rename_column"})


def pretokenized(names: NameFacts, facts: DatasetFacts, call: LoaderCall) -> bool:
    """The loader pads pre-tokenized rows (see the module's docstring)."""
    if facts.transforms_on_the_fly:
        return False
    collate, dataset = call.expr("collate_fn"), call.expr("dataset")
    if collate is None or dataset is None:
        return False
    return _padding_collate(names, collate, call) and _rows(dataset, call)


def _padding_collate(names: NameFacts, expr: cst.BaseExpression, call: LoaderCall) -> bool:
    target, scope = follow_name(expr, call.scope)
    if scope is None:
        return False
    # Bound in branches (``default_data_collator`` when padded to the maximum
    # length, ``DataCollatorWithPadding(...)`` otherwise): a padding collate whichever runs.
    each = _each_binding(target, scope, lambda value, owner: _padding_target(names, value, owner))
    return _padding_target(names, target, scope) if each is None else each


def _each_binding(
    target: cst.BaseExpression, scope: Scope, test: Callable[[cst.BaseExpression, Scope], bool]
) -> bool | None:
    """For a name bound more than once (which ``follow_name`` stops at),
    whether ``test`` holds for each of its values; None for anything else."""
    found = scope.lookup(target.value) if type(target) is cst.Name else None
    if found is None or len(found[1]) < 2:
        return None
    return all(binding.value is not None and test(binding.value, found[0]) for binding in found[1])


def _padding_target(names: NameFacts, target: cst.BaseExpression, scope: Scope) -> bool:
    if type(target) is cst.Call:
        target = target.func
    qualified = names.imports.qualify(target)
    if qualified is not None:
        module, _, name = qualified.rpartition(".")
        return module.split(".")[0] == "transformers" and (name.startswith("DataCollator") or name == "default_data_collator")
    if type(target) is cst.Name:
        fn = names.definition(target.value, scope)
        return fn is not None and isinstance(fn.node, cst.FunctionDef) and _only_pads(fn.node)
    return False


def _only_pads(node: cst.FunctionDef) -> bool:
    """``def collate(examples): return tokenizer.pad(examples, ...)``."""
    params = node.params.params
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    statements = [s for s in body if not (type(s) is cst.SimpleStatementLine and type(s.body[0]) is cst.Expr
                                          and isinstance(s.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))]
    if len(params) != 1 or len(statements) != 1 or type(statements[0]) is not cst.SimpleStatementLine:
        return False
    (small,) = statements[0].body if len(statements[0].body) == 1 else (None,)
    value = small.value if type(small) is cst.Return else None
    return (
        type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value == "pad"
        and bool(value.args) and type(value.args[0].value) is cst.Name and value.args[0].value.value == params[0].name.value
    )


def _rows(expr: cst.BaseExpression, call: LoaderCall) -> bool:
    target, scope = follow_name(expr, call.scope)
    if scope is None:
        return False
    each = _each_binding(target, scope, lambda value, _: _rows_value(value))  # bound again: another split
    return _rows_value(target) if each is None else each


def _rows_value(target: cst.BaseExpression) -> bool:
    """A split by name (``ds["train"]``, ``ds["a" if mnli else "b"]``) or a row method's result."""
    if type(target) is cst.Subscript:
        key = target.slice[0].slice if len(target.slice) == 1 else None
        if type(key) is not cst.Index:
            return False
        value = key.value
        if type(value) is cst.IfExp:
            return type(value.body) is cst.SimpleString and type(value.orelse) is cst.SimpleString
        return type(value) is cst.SimpleString
    if type(target) is cst.Call and type(target.func) is cst.Attribute:
        return target.func.attr.value in _ROW_METHODS
    return False
