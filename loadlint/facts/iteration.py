"""Iteration sites: ``for ... in <loader>`` loops, ``next(iter(<loader>))``
and bare ``iter(<loader>)`` calls, and the transfers (``.to``/``.cuda``/``.pin_memory``) of a loader's
batches inside its loop (``.type(torch.cuda.FloatTensor)`` counts as a copy, method ``"type"``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from loadlint.facts.control import names_in
from loadlint.facts.cursor import Cursor, Provider, root_name
from loadlint.facts.names import FunctionFacts, Key, LoopFrame
from loadlint.facts.resolve import ImportTable, Point, Scope, canonical, dotted_name, evaluate

#: What a part of a batch is written as: ``batch``, ``batch[0]``, ``batch.x``.
_PARTS = frozenset({cst.Name, cst.Subscript, cst.Attribute})
_ITER_WRAPPERS = {"enumerate", "tqdm", "trange", "zip", "iter", "islice", "track", "chain"}
TRANSFER_METHODS = ("to", "cuda", "pin_memory")
#: ``x.type(torch.cuda.FloatTensor)`` and the other ``torch.cuda.*Tensor`` types.
_CUDA_TENSOR_PREFIX = "torch.cuda."


def cuda_tensor_type(node: cst.Call, imports: ImportTable) -> bool:
    """``<x>.type(torch.cuda.<Kind>Tensor)``: a copy to the GPU spelled as a type."""
    func = node.func
    if type(func) is not cst.Attribute or func.attr.value != "type":
        return False
    for i, arg in enumerate(node.args):
        if (arg.keyword is None and i == 0) or (arg.keyword is not None and arg.keyword.value == "dtype"):
            value = arg.value
            if type(value) is cst.SimpleString:
                name = value.evaluated_value if isinstance(value.evaluated_value, str) else ""
            else:
                name = canonical(imports.qualify(value)) or ""
            return name.startswith(_CUDA_TENSOR_PREFIX) and name.endswith("Tensor")
    return False


def plain_copy(node: cst.Call, method: str) -> bool:
    """A copy call whose ``non_blocking`` can be added: no unpacking, and no
    positional argument past the device (and dtype, for ``.to``)."""
    positional = sum(1 for a in node.args if a.keyword is None)
    return not any(a.star for a in node.args) and positional <= (2 if method == "to" else 1)


@dataclass(eq=False)
class Iteration:
    """``for ... in <loader>`` (possibly wrapped in enumerate/tqdm/zip)."""

    key: Key
    node: cst.For
    scope: Scope
    outer: tuple[LoopFrame, ...]
    at_module_level: bool
    in_main_guard: bool


@dataclass(eq=False)
class Transfer:
    """``x.to(device)`` / ``x.cuda()`` / ``x.pin_memory()`` on a batch of a loader."""

    node: cst.Call
    method: str
    key: Key
    device: cst.BaseExpression | None
    scope: Scope
    non_blocking: bool
    #: Where the device is read (a binding of its name after it does not count).
    point: Point | None = None


@dataclass(eq=False)
class NextIter:
    """``next(iter(<loader>))``."""

    node: cst.Call
    key: Key
    in_loop: bool
    at_module_level: bool = False
    in_main_guard: bool = False


@dataclass(eq=False)
class IterCall:
    """``iter(<loader>)`` on its own (not under ``next`` or a ``for``): it
    starts the workers as a loop would."""

    node: cst.Call
    key: Key
    at_module_level: bool
    in_main_guard: bool


@dataclass
class IterationFacts:
    """Where a module iterates its loaders and moves their batches."""

    iterations: list[Iteration] = field(default_factory=list)
    transfers: list[Transfer] = field(default_factory=list)
    next_iter: list[NextIter] = field(default_factory=list)
    iter_calls: list[IterCall] = field(default_factory=list)
    #: The parameters each function iterates with ``for``.
    iterated_params: dict[FunctionFacts, set[str]] = field(default_factory=dict)
    #: ``for ... in f(...)``: id of each call a loop iterates as it is (no
    #: variable: ``for batch in DataLoader(...)``) -> the loop's scope.
    iterated_calls: dict[int, Scope] = field(default_factory=dict)


def repeating(loops: list[LoopFrame], key: Key) -> tuple[LoopFrame, ...]:
    """The loops that repeat a use of ``key``: not one whose variable it is,
    taking each loader of a container in turn (one pass per loader)."""
    return tuple(frame for frame in loops if frame.spreads is None or frame.spreads != key[1])


def transfer_device(node: cst.Call, method: str, scope: Scope) -> tuple[cst.BaseExpression | None, bool]:
    """(device expression, non_blocking) of a ``.to``/``.cuda``/``.pin_memory`` call."""
    device = None
    non_blocking = False
    if method == "to":
        for i, arg in enumerate(node.args):
            if arg.keyword is None and i == 0:
                device = arg.value
            elif arg.keyword is not None and arg.keyword.value == "device":
                device = arg.value
            elif arg.keyword is not None and arg.keyword.value == "non_blocking":
                non_blocking = evaluate(arg.value, scope) is not False
    else:
        non_blocking = any(
            a.keyword is not None and a.keyword.value == "non_blocking" and evaluate(a.value, scope) is not False
            for a in node.args
        )
    return device, non_blocking


class IterationProvider(Provider[IterationFacts]):
    """Records where loaders are iterated and their batches moved."""

    def __init__(self, cursor: Cursor, facts: IterationFacts) -> None:
        super().__init__(cursor, facts)
        #: ``iter(...)`` calls already recorded under a ``next`` or a ``for``
        #: (parents are visited first).
        self._consumed: set[int] = set()
        #: id of a loop over a loader -> the names its body binds to parts of
        #: the batch (``images, masks = batch["image"], batch["mask"]``).
        self._parts: dict[int, set[str]] = {}

    def _batch_names(self, frame: LoopFrame) -> frozenset[str] | set[str]:
        parts = self._parts.get(id(frame.node))
        return frame.targets | parts if parts else frame.targets

    def visit_Assign(self, node: cst.Assign) -> None:
        loops = self.cursor.loops
        frame = next((f for f in reversed(loops) if f.iterates), None)
        if frame is None:
            return
        batch = self._batch_names(frame)
        values = [e.value for e in node.value.elements] if type(node.value) is cst.Tuple else [node.value]
        if all(type(v) in _PARTS and root_name(v) in batch for v in values):
            self._parts.setdefault(id(frame.node), set()).update(n for t in node.targets for n in names_in(t.target))

    def _iterated_keys(self, node: cst.BaseExpression) -> list[Key]:
        """Loader keys iterated by ``for _ in node`` (wrappers unwrapped)."""
        if type(node) is cst.Call:
            name = dotted_name(node.func) or ""
            if name == "iter":
                self._consumed.add(id(node))
            if name.rsplit(".", 1)[-1] in _ITER_WRAPPERS:
                keys: list[Key] = []
                args = node.args if name.endswith(("zip", "chain")) else node.args[:1]
                for arg in args:
                    if arg.keyword is None and arg.star == "":
                        keys.extend(self._iterated_keys(arg.value))
                return keys
            self.facts.iterated_calls[id(node)] = self.cursor.scope
            return []
        key = self.cursor.key_of(node)
        return [key] if key is not None else []

    def visit_For(self, node: cst.For) -> None:
        cursor = self.cursor
        frame = cursor.frame
        assert frame is not None and frame.node is node
        for key in self._iterated_keys(node.iter):
            frame.iterates.append(key)
            self.facts.iterations.append(
                Iteration(
                    key,
                    node,
                    cursor.scope,
                    repeating(cursor.loops, key),
                    at_module_level=not cursor.functions,
                    in_main_guard=cursor.main_guard_depth > 0,
                )
            )
            fn = cursor.function
            if fn is not None and key[0] == id(fn.scope) and key[1] in fn.params:
                self.facts.iterated_params.setdefault(fn, set()).add(key[1])

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is cst.Attribute:
            if func.attr.value in TRANSFER_METHODS or cuda_tensor_type(node, self.cursor.imports):
                self._record_transfer(node, func)
        elif type(func) is cst.Name and func.value == "next":
            self._record_next_iter(node)
        elif type(func) is cst.Name and func.value == "iter" and node.args and id(node) not in self._consumed:
            key = self.cursor.key_of(node.args[0].value)
            if key is not None:
                cursor = self.cursor
                self.facts.iter_calls.append(
                    IterCall(node, key, not cursor.functions, cursor.main_guard_depth > 0)
                )

    def _record_transfer(self, node: cst.Call, func: cst.Attribute) -> None:
        root = root_name(func.value)
        if root is None:
            return
        for frame in reversed(self.cursor.loops):
            if frame.iterates and root in self._batch_names(frame):
                method = func.attr.value
                device, non_blocking = transfer_device(node, method, self.cursor.scope)
                self.facts.transfers.append(Transfer(
                    node, method, frame.iterates[0], device, self.cursor.scope, non_blocking, self.cursor.point()))
                break

    def _record_next_iter(self, node: cst.Call) -> None:
        if not node.args or type(node.args[0].value) is not cst.Call:
            return
        inner = node.args[0].value
        if dotted_name(inner.func) == "iter" and inner.args:
            self._consumed.add(id(inner))
            key = self.cursor.key_of(inner.args[0].value)
            if key is not None:
                cursor = self.cursor
                self.facts.next_iter.append(
                    NextIter(node, key, bool(repeating(cursor.loops, key)), not cursor.functions, cursor.main_guard_depth > 0)
                )
