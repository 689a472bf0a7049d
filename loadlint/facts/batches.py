"""Where a loader's batches are and where they go, for LL202: batches that
are already on the GPU (pinning them raises), batches that never reach it
(one batch peeked at, batches sent back to the host), and batches of
indices (too small to gain from pinning).

These tests read the tree lazily, for the few loaders LL202 would report:
the collection pass does not pay for them.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import libcst as cst

from loadlint.cst.walk import find_all, walk
from loadlint.facts.accelerator import AcceleratorFacts, device_kind
from loadlint.facts.cursor import root_name
from loadlint.facts.iteration import IterationFacts
from loadlint.facts.loaders import LoaderCall
from loadlint.facts.names import Key, NameFacts
from loadlint.facts.resolve import ImportTable, Scope, canonical, dotted_name, follow_name

_MAX_DEPTH = 8
#: Expressions looked at when searching a dataset's construction for a device.
_MAX_NODES = 400
#: ``first(loader)``: MONAI's and the like, one batch.
_FIRST = frozenset({"first", "monai.utils.first", "monai.utils.misc.first"})
#: Methods that keep a tensor where it is (or make a copy of it there).
_SAME_PLACE = frozenset({
    "half", "float", "double", "long", "int", "bool", "byte", "short", "bfloat16", "contiguous", "clone", "detach",
    "view", "reshape", "squeeze", "unsqueeze", "flatten", "permute", "t", "requires_grad_", "type_as",
})
_INDEX_CALLS = frozenset({"torch.arange", "torch.randperm", "torch.nonzero", "numpy.arange", "numpy.nonzero"})
_DTYPES = frozenset({
    "float16", "float32", "float64", "bfloat16", "half", "float", "double", "int8", "int16", "int32", "int64",
    "uint8", "long", "int", "bool", "short", "complex64", "complex128",
})


# -- batches already on the GPU ----------------------------------------------------------------


def _cuda_tensor(node: cst.BaseExpression, scope: Scope | None, imports: ImportTable, depth: int = 0) -> bool:
    """A tensor placed on CUDA: ``x.cuda()``, ``x.to("cuda:0")``,
    ``torch.rand(..., device="cuda")``, then any same-place method
    (``.cuda().half()``); a name bound once to one."""
    if depth > _MAX_DEPTH:
        return False
    if type(node) is cst.Name:
        target, owner = follow_name(node, scope)
        return target is not node and _cuda_tensor(target, owner, imports, depth + 1)
    if type(node) is not cst.Call:
        return False
    func = node.func
    if type(func) is cst.Attribute:
        method = func.attr.value
        if method == "cuda":
            return True
        if method == "to":
            device = node.args[0].value if node.args and node.args[0].keyword is None else _keyword(node, "device")
            if device is not None and device_kind(device, scope, imports) == "cuda":
                return True
        if method in _SAME_PLACE or method == "to":
            return _cuda_tensor(func.value, scope, imports, depth + 1)
    device = _keyword(node, "device")
    return device is not None and device_kind(device, scope, imports) == "cuda"


def _keyword(node: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def _cuda_device_inside(node: cst.BaseExpression, scope: Scope | None, imports: ImportTable, depth: int = 0) -> bool:
    """A ``device=<CUDA>`` keyword anywhere in an expression, following
    names (MONAI transforms built with ``device="cuda:0"``); a name bound
    more than once (a notebook's cells) counts when each binding has one."""
    stack: list[tuple[cst.CSTNode, Scope | None, int]] = [(node, scope, depth)]
    seen = 0
    while stack and seen < _MAX_NODES:
        current, where, level = stack.pop()
        seen += 1
        if type(current) is cst.Arg and current.keyword is not None and current.keyword.value == "device":
            if device_kind(current.value, where, imports) == "cuda":
                return True
        if type(current) is cst.Name and level < _MAX_DEPTH:
            target, owner = follow_name(current, where)
            if target is not current:
                stack.append((target, owner, level + 1))
            elif _each_binding_on_cuda(current, where, imports, level + 1):
                return True
            continue
        # In source order: a transform list's ``device=`` comes early, and the node budget may end first.
        stack.extend((child, where, level) for child in reversed(current.children))
    return False


def _each_binding_on_cuda(name: cst.Name, scope: Scope | None, imports: ImportTable, depth: int) -> bool:
    found = scope.lookup(name.value) if scope is not None else None
    if found is None or len(found[1]) < 2 or depth >= _MAX_DEPTH:
        return False
    owner, bindings = found
    return all(b.value is not None and _cuda_device_inside(b.value, owner, imports, depth) for b in bindings)


def batches_on_gpu(call: LoaderCall, names: NameFacts, accelerator: AcceleratorFacts) -> str | None:
    """Why the loader's batches are already CUDA tensors (pinning them
    raises), or None: a ``TensorDataset`` of CUDA tensors, a dataset built
    with a CUDA device (its transforms run there), or a ``collate_fn`` that
    moves its batch to the GPU."""
    imports = names.imports
    expr = call.expr("dataset")
    if expr is not None:
        scope = call.scope_of("dataset")
        target, owner = follow_name(expr, scope)
        if _cuda_tensor(target, owner, imports):
            return "the dataset is on the GPU"
        if type(target) is cst.Call:
            qualified = canonical(imports.qualify(target.func))
            if qualified == "torch.utils.data.TensorDataset" and any(
                _cuda_tensor(a.value, owner, imports) for a in target.args
            ):
                return "the `TensorDataset` holds CUDA tensors"
            if _cuda_device_inside(target, owner, imports):
                return "the dataset is built with a CUDA device"
        elif type(target) is cst.Name and _each_binding_on_cuda(target, owner, imports, 0):
            return "the dataset is built with a CUDA device"
    collate = call.expr("collate_fn")
    if collate is not None and _collate_on_gpu(collate, call.scope_of("collate_fn"), names, accelerator):
        return "the `collate_fn` moves batches to the GPU"
    return None


def _collate_on_gpu(expr: cst.BaseExpression, scope: Scope, names: NameFacts, accelerator: AcceleratorFacts) -> bool:
    target, owner = follow_name(expr, scope)
    if type(target) is cst.Lambda:
        return any(fn.node is target for fn in accelerator.cuda_code)
    if type(target) is cst.Call:
        # ``functools.partial(collate, device="cuda")``
        return _cuda_device_inside(target, owner, names.imports)
    if type(target) is cst.Name and owner is not None:
        found = names.definition(target.value, owner)
        if found is not None and found in accelerator.cuda_code:
            return True
        # A parameter (a factory handed its collate function, as DLRM's):
        # the module's own collate functions tell where batches end up.
        look = scope.lookup(target.value)
        if look is not None and all(b.value is None for b in look[1]) and look[0].kind == "function":
            return any("collate" in fn.name for fn in names.functions if fn in accelerator.cuda_code)
    return False


# -- batches that never reach the GPU ----------------------------------------------------------


def index_dataset(call: LoaderCall, names: NameFacts) -> bool:
    """The dataset is a range of indices or an index tensor
    (``range(t.size(0))``, ``torch.arange(n)``, ``mask.nonzero().view(-1)``,
    ``torch.where(mask)[0]``): its batches are a few integers each."""
    expr = call.expr("dataset")
    if expr is None:
        return False
    target, owner = follow_name(expr, call.scope_of("dataset"))
    return _index_tensor(target, owner, names.imports)


def index_value(node: cst.BaseExpression, scope: Scope | None, imports: ImportTable) -> bool:
    """An expression that ``index_dataset`` accepts as a dataset."""
    return _index_tensor(node, scope, imports)


def _index_tensor(node: cst.BaseExpression, scope: Scope | None, imports: ImportTable, depth: int = 0) -> bool:
    if depth > _MAX_DEPTH:
        return False
    if type(node) is cst.Name:
        target, owner = follow_name(node, scope)
        if target is not node:
            return _index_tensor(target, owner, imports, depth + 1)
        # Bound more than once: ``idx = mask.nonzero().view(-1)``, then
        # ``idx = idx.split(size)[rank]`` (each binding an index tensor, or a part of the last).
        found = scope.lookup(node.value) if scope is not None else None
        values = [b.value for b in found[1] if b.value is not None] if found is not None else []
        if found is None or len(values) != len(found[1]) or len(values) > 4:
            return False
        derived = [root_name(v) == node.value for v in values]
        return not all(derived) and all(
            own or _index_tensor(v, found[0], imports, depth + 1) for v, own in zip(values, derived)
        )
    if type(node) is cst.Subscript:
        # ``torch.where(mask)[0]``, ``idx.split(n)[rank]``
        inner = node.value
        if type(inner) is cst.Call and canonical(imports.qualify(inner.func)) in ("torch.where", "numpy.where"):
            return True
        if type(inner) is cst.Call and type(inner.func) is cst.Attribute and inner.func.attr.value in ("split", "chunk"):
            return _index_tensor(inner.func.value, scope, imports, depth + 1)
        return _index_tensor(inner, scope, imports, depth + 1)
    if type(node) is not cst.Call:
        return False
    func = node.func
    if type(func) is cst.Name and func.value == "range" and (scope is None or scope.lookup("range") is None):
        return True
    if canonical(imports.qualify(func)) in _INDEX_CALLS:
        return True
    if type(func) is cst.Attribute:
        if func.attr.value == "nonzero":
            return True
        if func.attr.value in _SAME_PLACE or func.attr.value in ("to", "cpu", "cuda"):
            return _index_tensor(func.value, scope, imports, depth + 1)
    return False


def string_dataset(call: LoaderCall) -> bool:
    """The dataset is a list or tuple of strings (batches of text, which
    pinning leaves alone)."""
    expr = call.expr("dataset")
    if expr is None:
        return False
    target, _ = follow_name(expr, call.scope_of("dataset"))
    if not isinstance(target, (cst.List, cst.Tuple)) or not target.elements:
        return False
    return all(isinstance(e.value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)) for e in target.elements)


class _Reads:
    """How a name is read in a tree: ``peek`` (``next(iter(x))``,
    ``first(x)``), ``for`` (``for b in x``, with the loop) or ``other``."""

    def __init__(self, name: str, imports: ImportTable) -> None:
        self.name = name
        self.imports = imports
        self.skip: set[int] = set()
        self.peeks: list[cst.Call] = []
        self.loops: list[cst.For] = []
        #: Names bound to ``iter(x)`` (``dataiter = iter(testloader)``).
        self.iterators: list[str] = []
        self.other = 0

    def _is_name(self, node: cst.BaseExpression) -> bool:
        return type(node) is cst.Name and node.value == self.name

    def visit_Call(self, node: cst.Call) -> None:
        func = dotted_name(node.func) or ""
        args = node.args
        if len(args) != 1 or args[0].keyword is not None:
            return
        value = args[0].value
        if func == "next" and type(value) is cst.Call and dotted_name(value.func) == "iter" and len(value.args) == 1:
            value = value.args[0].value
        elif not (func in _FIRST or canonical(self.imports.qualify_dotted(func)) in _FIRST):
            return
        if self._is_name(value):
            self.skip.add(id(value))
            self.peeks.append(node)

    def visit_For(self, node: cst.For) -> None:
        inner = node.iter
        # ``enumerate(loader)``, ``tqdm(loader, ...)``
        while type(inner) is cst.Call and inner.args and (dotted_name(inner.func) or "").rsplit(".", 1)[-1] in (
            "enumerate", "tqdm", "trange", "track",
        ):
            inner = inner.args[0].value
        if self._is_name(inner):
            self.skip.add(id(inner))
            self.loops.append(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if len(node.targets) == 1 and type(node.targets[0].target) is cst.Name and type(value) is cst.Call:
            if dotted_name(value.func) == "iter" and len(value.args) == 1 and self._is_name(value.args[0].value):
                self.skip.add(id(value.args[0].value))
                self.iterators.append(node.targets[0].target.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self.skip.add(id(node.target))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.skip.add(id(node.attr))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.skip.add(id(node.keyword))

    def visit_Param(self, node: cst.Param) -> None:
        self.skip.add(id(node.name))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name and id(node) not in self.skip:
            self.other += 1


def _roots(scope: Scope, names: NameFacts, statements: Sequence[cst.BaseStatement]) -> Sequence[cst.CSTNode]:
    """The trees of the function (or module) a scope belongs to."""
    if scope.kind == "module":
        return statements
    return [fn.node for fn in names.functions if fn.scope is scope][:1]


def _builds_loader(value: cst.BaseExpression | None) -> bool:
    return type(value) is cst.Call and (dotted_name(value.func) or "").rsplit(".", 1)[-1] == "DataLoader"


def _reads(call: LoaderCall, names: NameFacts, statements: Sequence[cst.BaseStatement]) -> _Reads | None:
    """How the variable the loader is bound to is read in the function (or
    module) that binds it; None when it is not a plain local name, or is
    bound to something else than a loader."""
    key = call.key
    if key is None or "." in key[1] or "[" in key[1]:
        return None
    found = call.scope.lookup(key[1])
    if found is None or id(found[0]) != key[0]:
        return None
    # Bound more than once (a notebook's cells rebuild ``loader``): the reads
    # speak for every loader only when each binding is a loader.
    if len(found[1]) > 1 and not all(_builds_loader(b.value) for b in found[1]):
        return None
    roots = _roots(found[0], names, statements)
    if not roots:
        return None
    reads = _Reads(key[1], names.imports)
    for root in roots:
        walk(root, reads)
    return reads


def one_batch_read(
    call: LoaderCall, names: NameFacts, iteration: IterationFacts, keys: set[Key],
    statements: Sequence[cst.BaseStatement],
) -> bool:
    """The loader is only ever read for single batches (``first(loader)``,
    ``next(iter(loader))``, also in a loop that times them): never
    iterated, passed on or returned.  Without a stream of copies to
    overlap, pinning gains nothing."""
    if any(it.key in keys for it in iteration.iterations) or any(c.key in keys for c in iteration.iter_calls):
        return False
    # A peek must be in sight before the function is read for the loader's other uses.
    if not any(n.key in keys for n in iteration.next_iter) and not _first_imported(names.imports):
        return False
    reads = _reads(call, names, statements)
    return reads is not None and bool(reads.peeks) and not reads.loops and reads.other == 0


def _first_imported(imports: ImportTable) -> bool:
    return any(local == "first" or qualified.split(".", 1)[0] == "monai" for local, qualified in imports.names.items())


def batches_to_host(
    call: LoaderCall, names: NameFacts, iteration: IterationFacts, keys: set[Key],
    statements: Sequence[cst.BaseStatement],
) -> bool:
    """The loader is only iterated, and its loops send the batches to the
    host (``x.to(torch.float16).cpu().numpy()``), never to a device."""
    inline = _inline_loop(call, names, statements)
    if inline is not None:
        return _host_only(inline, call.scope, names.imports)
    # The loops' bodies first: most send batches to the GPU, and reading the
    # whole function for other uses is dearer.
    loops = [it.node for it in iteration.iterations if it.key in keys]
    if not loops or not all(
        _host_only(loop, call.scope, names.imports) or _left_in_place(loop, call.scope, names) for loop in loops
    ):
        return False
    reads = _reads(call, names, statements)
    if reads is None or reads.other or reads.peeks or not reads.loops:
        return False
    roots = _roots(call.scope.function, names, statements)
    return all(_read_once(name, roots) for name in reads.iterators)


def _read_once(iterator: str, roots: Sequence[cst.CSTNode]) -> bool:
    """The iterator's only uses are ``next(it)`` outside any loop (besides
    binding and ``del``): single batches, looked at (``images, labels =
    next(dataiter)``)."""
    uses = targets = nexts = 0
    for root in roots:
        uses += sum(1 for n in find_all(root, cst.Name) if n.value == iterator)
        targets += sum(
            1 for t in find_all(root, cst.AssignTarget) if type(t.target) is cst.Name and t.target.value == iterator
        )
        nexts += sum(
            1 for c in find_all(root, cst.Call) if dotted_name(c.func) == "next" and len(c.args) == 1
            and type(c.args[0].value) is cst.Name and c.args[0].value.value == iterator
        )
        targets += sum(1 for d in find_all(root, cst.Del) for n in find_all(d, cst.Name) if n.value == iterator)
        loops: list[cst.CSTNode] = [*find_all(root, cst.For), *find_all(root, cst.While)]
        if any(n.value == iterator for loop in loops for n in find_all(loop, cst.Name)):
            return False
    return uses == targets + nexts


class _InlineLoop:
    """The ``for`` whose iterable is a given call (under wrappers such as ``tqdm``)."""

    def __init__(self, call: cst.Call) -> None:
        self.call = call
        self.found: cst.For | None = None

    def visit_For(self, node: cst.For) -> None:
        inner = node.iter
        while type(inner) is cst.Call and inner is not self.call and inner.args:
            inner = inner.args[0].value
        if inner is self.call:
            self.found = node


def _inline_loop(call: LoaderCall, names: NameFacts, statements: Sequence[cst.BaseStatement]) -> cst.For | None:
    if call.key is not None or call.returned_from is not None:
        return None
    finder = _InlineLoop(call.node)
    for root in _roots(call.scope.function, names, statements):
        walk(root, finder)
    return finder.found


def _host_only(loop: cst.For, scope: Scope, imports: ImportTable) -> bool:
    targets = {n.value for n in _names(loop.target)}
    host = gpu = False
    for node in _calls(loop.body):
        func = node.func
        if type(func) is not cst.Attribute or root_name(func.value) not in targets:
            continue
        method = func.attr.value
        if method in ("cpu", "numpy", "tolist", "item"):
            host = True
        elif method == "cuda":
            gpu = True
        elif method == "to":
            device = node.args[0].value if node.args and node.args[0].keyword is None else _keyword(node, "device")
            if device is not None and not _dtype(device, imports) and device_kind(device, scope, imports) != "cpu":
                gpu = True
    return host and not gpu


#: Builtins that read a batch where it is.
_BUILTINS = frozenset({
    "print", "len", "int", "float", "str", "list", "tuple", "dict", "zip", "enumerate", "range", "sum", "max",
    "min", "abs", "round", "isinstance", "sorted", "repr", "format",
})


def _left_in_place(loop: cst.For, scope: Scope, names: NameFacts) -> bool:
    """The loop moves nothing to a device, and its batches reach only
    builtins, functions of imported modules (``torch.max``), their own
    methods and models of classes of this module that place nothing on a
    device (``net = Net()``; the tutorial's CIFAR-10 test loop on the CPU)."""
    imports = names.imports
    bound = {n.value for n in _names(loop.target)}
    for target in find_all(loop.body, cst.AssignTarget):
        bound |= {n.value for n in _names(target.target)}
    for node in _calls(loop.body):
        func = node.func
        if type(func) is cst.Attribute and func.attr.value in ("cuda", "pin_memory", "type"):
            return False
        if type(func) is cst.Attribute and func.attr.value == "to":
            device = node.args[0].value if node.args and node.args[0].keyword is None else _keyword(node, "device")
            if device is None or not (_dtype(device, imports) or device_kind(device, scope, imports) == "cpu"):
                return False
        if any(arg.keyword is not None and arg.keyword.value == "non_blocking" for arg in node.args):
            return False
        if not any(n.value in bound for arg in node.args for n in find_all(arg.value, cst.Name)):
            continue
        root = root_name(func)
        if type(func) is cst.Name:
            if func.value in _BUILTINS and scope.lookup(func.value) is None:
                continue
            if _placing_nothing(func.value, scope, names):
                continue
        elif type(func) is cst.Attribute and root is not None and (root in bound or root in imports.names):
            continue
        return False
    return True


def _placing_nothing(name: str, scope: Scope, names: NameFacts) -> bool:
    """Every binding of ``name`` is an instance of a class of this module
    whose methods call no ``.cuda()``/``.to()``."""
    found = scope.lookup(name)
    if found is None:
        return False
    for binding in found[1]:
        value = binding.value
        if type(value) is not cst.Call or type(value.func) is not cst.Name:
            return False
        cls = names.classes.get(value.func.value)
        if cls is None or any(
            type(c.func) is cst.Attribute and c.func.attr.value in ("cuda", "to") for c in find_all(cls.node, cst.Call)
        ):
            return False
    return True


def _dtype(node: cst.BaseExpression, imports: ImportTable) -> bool:
    qualified = canonical(imports.qualify(node)) or ""
    head, _, last = qualified.rpartition(".")
    return head in ("torch", "numpy") and last in _DTYPES


def _names(node: cst.BaseExpression) -> Iterator[cst.Name]:
    if type(node) is cst.Name:
        yield node
    elif isinstance(node, (cst.Tuple, cst.List)):
        for element in node.elements:
            value = element.value.value if type(element.value) is cst.StarredElement else element.value
            yield from _names(value)


class _CallFinder:
    def __init__(self) -> None:
        self.found: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.found.append(node)


def _calls(node: cst.CSTNode) -> list[cst.Call]:
    finder = _CallFinder()
    walk(node, finder)
    return finder.found

