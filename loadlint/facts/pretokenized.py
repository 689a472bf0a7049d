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
argument, or a ``transformers`` collator called on it (once per branch,
after statements that set its options and call nothing), and the dataset is a split of a dataset dictionary
(``tokenized_datasets["train"]``, the key a string or a choice of two) or
a ``.map(...)`` result, in a module that sets no on-the-fly transform
(``set_transform``/``with_transform``).  A name bound more than once
qualifies when each of its bindings does (Hugging Face's example scripts
bind the collator in two branches and ``eval_dataset`` twice).

A local function that only stacks and pads what its argument holds
(``pad_sequence``, ``torch.stack``: the torchtext-era notebooks'
``get_collate_fn(pad_index)``, which returns such a function) pads too.
A dataset passed in as a parameter is each value the module's calls pass,
and a name bound again as the rows are prepared (``train_data =
train_data.map(...)``, then ``.with_format("torch")``) is the binding that
reaches the call reading it.

Across modules, a module's summary lists its plain functions whose every
return passes the rows test or the collate test (``padded_row_helpers``),
and a loader built from such imported functions (``imported_rows``) is
taken back by LL201 once project analysis finds them listed there.
"""

from __future__ import annotations

from typing import Callable

import libcst as cst

from loadlint.cst.walk import find_all
from loadlint.facts.datasets import DatasetFacts, helper, passed_for
from loadlint.facts.loaders import LoaderCall
from loadlint.facts.names import ClassFacts, NameFacts
from loadlint.facts.resolve import Binding, Scope, canonical, dotted_name, follow_name, reaching

_ROW_METHODS = frozenset({"map", "with_format", "shuffle", "select", "filter", "remove_columns", "rename_column"})
#: What a collate function may call and still only pad: torch's stacking and
#: padding, and builtins that read its argument.
_PADDING_CALLS = frozenset({
    "torch.nn.utils.rnn.pad_sequence", "torch.stack", "torch.cat", "torch.tensor", "torch.as_tensor",
    "torch.LongTensor", "torch.nn.functional.pad",
})
_READING_BUILTINS = frozenset({"len", "max", "min", "list", "zip"})
#: Tensor methods a padding collate may call on what it padded: shape reads
#: and reorderings, no work per element.
_SHAPE_METHODS = frozenset({"size", "flip", "view", "reshape", "unsqueeze", "squeeze", "long", "bool", "contiguous"})
#: A dataset deserialized whole (DeepSpeed-Chat caches its tokenized splits
#: with ``torch.save`` and reads them back): the rows, held in memory.
_DESERIALIZED = frozenset({"torch.load", "pickle.load"})


def deserializing(names: NameFacts, value: cst.BaseExpression) -> bool:
    """``torch.load(...)`` or ``pickle.load(...)``: an object read whole into memory."""
    return type(value) is cst.Call and canonical(names.imports.qualify(value.func)) in _DESERIALIZED


def pretokenized(names: NameFacts, facts: DatasetFacts, call: LoaderCall) -> bool:
    """The loader pads pre-tokenized rows (see the module's docstring)."""
    if facts.transforms_on_the_fly:
        return False
    collate, dataset = call.expr("collate_fn"), call.expr("dataset")
    if collate is None or dataset is None:
        return False
    return _padding_collate(names, facts, collate, call) and _rows(names, facts, dataset, call.scope, call.node)


def _padding_collate(names: NameFacts, facts: DatasetFacts, expr: cst.BaseExpression, call: LoaderCall) -> bool:
    target, scope = follow_name(expr, call.scope)
    if scope is None:
        return False
    # Bound in branches (``default_data_collator`` when padded to the maximum
    # length, ``DataCollatorWithPadding(...)`` otherwise): a padding collate whichever runs.
    each = _each_binding(target, scope, lambda value, owner: _padding_target(names, facts, value, owner))
    return _padding_target(names, facts, target, scope) if each is None else each


def _each_binding(
    target: cst.BaseExpression, scope: Scope, test: Callable[[cst.BaseExpression, Scope], bool]
) -> bool | None:
    """For a name bound more than once (which ``follow_name`` stops at),
    whether ``test`` holds for each of its values; None for anything else."""
    found = scope.lookup(target.value) if type(target) is cst.Name else None
    if found is None or len(found[1]) < 2:
        return None
    return all(binding.value is not None and test(binding.value, found[0]) for binding in found[1])


def _padding_target(names: NameFacts, facts: DatasetFacts, target: cst.BaseExpression, scope: Scope) -> bool:
    built_by = helper(names, target, scope) if type(target) is cst.Call else None
    if built_by is not None:
        # ``get_collate_fn(pad_index)``: each function the helper returns pads.
        returned = facts.returns.get(built_by, [])
        return bool(returned) and all(
            type(value) is cst.Name and _padding_target(names, facts, value, built_by.scope) for value in returned
        )
    instance = type(target) is cst.Call
    if type(target) is cst.Call:
        target = target.func
    qualified = names.imports.qualify(target)
    if qualified is not None:
        module, _, name = qualified.rpartition(".")
        return module.split(".")[0] == "transformers" and (name.startswith("DataCollator") or name == "default_data_collator")
    if type(target) is cst.Name:
        fn = names.definition(target.value, scope)
        if isinstance(fn, ClassFacts):
            return instance and padding_class(names, fn)
        return fn is not None and isinstance(fn.node, cst.FunctionDef) and (
            _only_pads(fn.node, names) or _stacks_and_pads(fn.node, fn.scope, names)
        )
    return False


def padding_class(names: NameFacts, cls: ClassFacts) -> bool:
    """A collator class whose ``__call__(self, batch)`` only stacks and pads
    and whose ``__init__``, if any, only stores its arguments (DeepSpeed-Chat's
    ``DataCollatorReward``, ``DataCollatorRLHF``)."""
    if cls.nested or cls.bases:
        return False
    call, init = cls.methods.get("__call__"), cls.methods.get("__init__")
    if call is None or not isinstance(call.node, cst.FunctionDef) or set(cls.methods) - {"__call__", "__init__"}:
        return False
    if init is not None and not _stores_only(init.node):
        return False
    return _stacks_and_pads(call.node, call.scope, names, method=True)


def _stores_only(node: cst.CSTNode) -> bool:
    body = node.body.body if isinstance(node, cst.FunctionDef) and isinstance(node.body, cst.IndentedBlock) else ()
    return all(
        type(statement) is cst.SimpleStatementLine and all(
            type(small) is cst.Assign and type(small.value) is cst.Name
            and all(type(t.target) is cst.Attribute for t in small.targets) for small in statement.body)
        for statement in body)


def _stacks_and_pads(node: cst.FunctionDef, scope: Scope, names: NameFacts, method: bool = False) -> bool:
    """``def collate(batch)`` whose statements only bind names (or keys of
    a dict it made), choose in ``if``s that call nothing, and return,
    calling nothing but torch's stacking and padding, shape methods and
    builtins that read (``ids = pad_sequence([i["ids"] for i in batch], ...)``)."""
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    if len(node.params.params) != 1 + method or not body:
        return False
    if not all(_binds_or_returns(statement) for statement in body):
        return False
    for called in find_all(node, cst.Call):
        func = called.func
        if type(func) is cst.Name and func.value in _READING_BUILTINS and scope.lookup(func.value) is None:
            continue
        if type(func) is cst.Attribute and func.attr.value in _SHAPE_METHODS and names.imports.qualify(func) is None:
            continue
        if canonical(names.imports.qualify(func)) not in _PADDING_CALLS:
            return False
    return True


def _binds_or_returns(statement: cst.BaseStatement) -> bool:
    if type(statement) is cst.If:
        branches = _branches(statement)
        return branches is not None and all(_binds_or_returns(s) for s in branches)
    if type(statement) is not cst.SimpleStatementLine:
        return False
    for small in statement.body:
        if type(small) is cst.Assign:
            target = small.targets[0].target if len(small.targets) == 1 else None
            # ``batch["ids"] = ...``: a key of a local dict.
            bound = target.value if type(target) is cst.Subscript else target
            if type(bound) is not cst.Name:
                return False
        elif type(small) is cst.Expr:
            if not isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
                return False
        elif type(small) is not cst.Return:
            return False
    return True


def _only_pads(node: cst.FunctionDef, names: NameFacts) -> bool:
    """``def collate(examples): return tokenizer.pad(examples, ...)`` (or a
    ``transformers`` collator called on them), where the other statements
    only choose the padding options, calling nothing (accelerate's examples:
    ``if accelerator.mixed_precision == "fp8": pad_to_multiple_of = 16``,
    or one ``return`` per branch)."""
    params = node.params.params
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    if len(params) != 1 or not body:
        return False
    param = params[0].name.value
    return all(_pads_or_sets(statement, param, names) for statement in body) and _returns(body[-1])


def _returns(statement: cst.BaseStatement) -> bool:
    """The statement always returns (the function cannot fall off its end)."""
    if type(statement) is cst.SimpleStatementLine:
        return type(statement.body[-1]) is cst.Return
    if type(statement) is cst.If and isinstance(statement.body, cst.IndentedBlock) and statement.body.body:
        orelse = statement.orelse
        tail = orelse if type(orelse) is cst.If else orelse.body.body[-1] if type(orelse) is cst.Else and isinstance(
            orelse.body, cst.IndentedBlock) and orelse.body.body else None
        return tail is not None and _returns(statement.body.body[-1]) and _returns(tail)
    return False


def _pads_or_sets(statement: cst.CSTNode, param: str, names: NameFacts) -> bool:
    """A docstring, names bound to values that call nothing, ``return`` of the
    padded argument, or an ``if`` (calling nothing) whose branches are such."""
    if type(statement) is cst.SimpleStatementLine:
        for small in statement.body:
            if type(small) is cst.Return:
                if not _pad_of(small.value, param, names):
                    return False
            elif type(small) is cst.Assign:
                if not all(type(t.target) is cst.Name for t in small.targets) or _calls(small.value):
                    return False
            elif not (type(small) is cst.Expr and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString))):
                return False
        return True
    if type(statement) is cst.If:
        branches = _branches(statement)
        return branches is not None and all(_pads_or_sets(s, param, names) for s in branches)
    return False


def _branches(statement: cst.If) -> list[cst.BaseStatement] | None:
    """The statements of an ``if`` whose test calls nothing: its body's, then
    an ``elif`` (as one statement) or its ``else`` body's; None for a test
    that calls or a block on the ``if`` line."""
    orelse = statement.orelse
    blocks = [statement.body] + ([orelse.body] if type(orelse) is cst.Else else [])
    indented = [block for block in blocks if isinstance(block, cst.IndentedBlock)]
    if _calls(statement.test) or len(indented) != len(blocks):
        return None
    out: list[cst.BaseStatement] = [s for block in indented for s in block.body]
    return out + [orelse] if type(orelse) is cst.If else out


def _calls(node: cst.CSTNode | None) -> bool:
    return node is not None and next(iter(find_all(node, cst.Call)), None) is not None


def _pad_of(value: cst.BaseExpression | None, param: str, names: NameFacts) -> bool:
    """``<tokenizer>.pad(<param>, ...)`` or ``DataCollator...(...)(<param>)``."""
    if type(value) is not cst.Call or not value.args or type(value.args[0].value) is not cst.Name:
        return False
    if value.args[0].value.value != param:
        return False
    func = value.func
    if type(func) is cst.Attribute:
        return func.attr.value == "pad"
    if type(func) is cst.Call:
        module, _, name = (canonical(names.imports.qualify(func.func)) or "").rpartition(".")
        return module.split(".")[0] == "transformers" and name.startswith("DataCollator")
    return False


def _rows(
    names: NameFacts, facts: DatasetFacts, expr: cst.BaseExpression, scope: Scope, read: cst.Call | None,
    depth: int = 0,
) -> bool:
    target, owner = follow_name(expr, scope)
    if owner is None or depth > 3:
        return False
    if type(target) is cst.Name:
        found = owner.lookup(target.value)
        if found is not None and len(found[1]) == 1 and found[1][0].value is None:
            # A parameter: each value this module's calls pass for it.
            passed = _with_calls(passed_for(names, facts, target.value, owner))
            return bool(passed) and all(_rows(names, facts, value, caller, call, depth + 1) for value, caller, call in passed)
    each = _each_binding(target, owner, lambda value, _: _rows_value(value, names))  # bound again: another split
    if each is None:
        return _rows_value(target, names)
    reaching = _reaching(target, owner, read) if not each else None
    return each or (reaching is not None and _rows_value(reaching, names))


def _with_calls(
    passed: list[tuple[cst.BaseExpression, Scope]]
) -> list[tuple[cst.BaseExpression, Scope, cst.Call]]:
    """Each passed value with the call it is an argument of, found as the
    value of a binding of the caller's scope (``loader = build(ds, ...)``);
    one passed elsewhere has no program point, and then none is known."""
    out = []
    for value, caller in passed:
        call = next((
            binding.value for bindings in caller.bindings.values() for binding in bindings
            if type(binding.value) is cst.Call and any(arg.value is value for arg in binding.value.args)
        ), None)
        if call is None:
            return []
        out.append((value, caller, call))
    return out


def _reaching(target: cst.BaseExpression, scope: Scope, read: cst.Call | None) -> cst.BaseExpression | None:
    """The value of the one binding of a name that reaches ``read``, itself
    the value of a binding of the same scope (its program point): the last
    binding before it, made unconditionally, with no binding after it in a
    block (a loop could bring it back round)."""
    found = scope.lookup(target.value) if type(target) is cst.Name else None
    if found is None or found[0] is not scope or read is None:
        return None
    point = next((b.order for bs in scope.bindings.values() for b in bs if b.value is read), None)
    if point is None:
        return None
    before: list[Binding] = [b for b in found[1] if b.order < point]
    if not before or before[-1].path or any(b.path for b in found[1] if b.order >= point):
        return None
    return before[-1].value


def _rows_value(target: cst.BaseExpression, names: NameFacts) -> bool:
    """A split by name (``ds["train"]``, ``ds["a" if mnli else "b"]``), a
    row method's result, or a dataset deserialized whole."""
    if deserializing(names, target):
        return True
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


# -- across modules: a loader built from another module's helpers -----------

def padded_row_helpers(names: NameFacts, facts: DatasetFacts) -> dict[str, list[str]]:
    """This module's plain functions whose every return is pre-tokenized
    rows (``rows``) or a padding collate (``collates``), by the tests above,
    for a loader of another module built from them; none in a module that
    sets a per-item transform."""
    if facts.transforms_on_the_fly:
        return {}
    out: dict[str, list[str]] = {}
    module = names.module_scope
    for fn, returned in facts.returns.items():
        # Bound once at module level: the name the importer calls is this function.
        if fn.nested or fn.class_name is not None or len(module.bindings.get(fn.name, ())) != 1:
            continue
        values = [value for value in returned if value is not None]
        if not values or len(values) != len(returned):
            continue
        # ``return train, evaluation``: unpacked by the caller, each must be rows.
        parts = [e.value for v in values for e in (v.elements if type(v) is cst.Tuple else [cst.Element(v)])]
        if all(type(part) is not cst.StarredElement and _rows(names, facts, part, fn.scope, None) for part in parts):
            out.setdefault("rows", []).append(fn.name)
        elif all(type(value) is cst.Name and _padding_target(names, facts, value, fn.scope) for value in values):
            out.setdefault("collates", []).append(fn.name)
    for name, cls in names.classes.items():
        if len(module.bindings.get(name, ())) == 1 and padding_class(names, cls):
            out.setdefault("collates", []).append(name)
    return out


def imported_rows(names: NameFacts, facts: DatasetFacts, call: LoaderCall) -> dict[str, list[str]] | None:
    """For a loader whose rows or collate another module's function builds
    (``DataLoader(get_dataset(...), collate_fn=create_collate_fn())`` with
    both imported), the qualified functions, ``rows`` and ``collates``,
    that must be that module's ``padded_row_helpers``; the other half, if
    built here, passes the tests above.  None for anything else."""
    collate, dataset = call.expr("collate_fn"), call.expr("dataset")
    if facts.transforms_on_the_fly or collate is None or dataset is None:
        return None
    out: dict[str, list[str]] = {}
    if not _padding_collate(names, facts, collate, call):
        found = _imported_calls(names, collate, call)
        if found is None:
            return None
        out["collates"] = found
    if not _rows(names, facts, dataset, call.scope, call.node):
        found = _imported_calls(names, dataset, call)
        if found is None:
            return None
        out["rows"] = found
    return out or None


def _none(value: cst.BaseExpression | None) -> bool:
    return type(value) is cst.Name and value.value == "None"


def _imported_calls(names: NameFacts, expr: cst.BaseExpression, call: LoaderCall) -> list[str] | None:
    """The qualified imported functions whose results ``expr`` may be (a
    name: each binding that reaches the loader); None when one is anything else."""
    target, owner = follow_name(expr, call.scope)
    if owner is None:
        return None
    values: list[cst.BaseExpression | None] = [target]
    if type(target) is cst.Name:
        found = owner.lookup(target.value)
        if found is None:
            return None
        owner = found[0]
        bindings = found[1] if call.point is None else reaching(found[1], call.point)
        # ``a, b = build(...)``: the call; ``x = None`` on a path where no loader is built.
        values = [b.unpacks if b.value is None else b.value for b in bindings if not _none(b.value)]
    out = []
    for value in values:
        if type(value) is not cst.Call or helper(names, value, owner) is not None:
            return None
        head = (dotted_name(value.func) or "").partition(".")[0]
        imported = owner.lookup(head) if head else None
        qualified = names.imports.qualify(value.func)
        # The callee's name is the import alone (no other binding shadows it).
        if imported is None or imported[0].kind != "module" or len(imported[1]) != 1 or imported[1][0].value is not None \
                or qualified is None:
            return None
        out.append(qualified)
    return out or None
