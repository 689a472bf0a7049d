"""Accelerator evidence: whether the module uses CUDA, XLA or only the CPU,
and which functions and lambdas touch CUDA (worker code must not)."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from loadlint.facts.cursor import Cursor, Provider
from loadlint.facts.distributed import LIGHTNING_TRAINERS, in_test, lightning_accelerator
from loadlint.facts.iteration import TRANSFER_METHODS, cuda_tensor_type, transfer_device
from loadlint.facts.names import FunctionFacts, LambdaFacts
from loadlint.facts.resolve import MAX_REACHING, ImportTable, Point, Scope, canonical, evaluate, follow_name, reaching

XLA_DEVICE_CALLS = {"torch_xla.core.xla_model.xla_device", "torch_xla.device"}
_XLA_LOADERS = {
    "torch_xla.distributed.parallel_loader.MpDeviceLoader",
    "torch_xla.distributed.parallel_loader.ParallelLoader",
}
_ACCELERATORS = {"accelerate.Accelerator"}
#: Asking about CUDA is not using it.
_CUDA_QUERIES = {"torch.cuda.is_available", "torch.cuda.device_count", "torch.cuda.is_initialized"}

Code = FunctionFacts | LambdaFacts
Device = tuple[cst.BaseExpression, Scope]


@dataclass
class AcceleratorFacts:
    """Which devices a module uses (settled after the traversal)."""

    cuda: bool = False
    cpu_device: bool = False
    xla: bool = False
    #: An XLA device loader (``MpDeviceLoader``) is used.
    xla_loader: bool = False
    #: Device expressions met (``torch.device(...)``, ``.to(x)``), settled after the pass.
    devices: list[Device] = field(default_factory=list)
    #: Functions and lambdas that touch CUDA.
    cuda_code: set[Code] = field(default_factory=set)


def _uses_cuda(qualified: str | None) -> bool:
    return qualified is not None and qualified.startswith("torch.cuda.") and qualified not in _CUDA_QUERIES


class AcceleratorProvider(Provider[AcceleratorFacts]):
    """Records device use; ``finish`` decides what the devices are."""

    def __init__(self, cursor: Cursor, facts: AcceleratorFacts) -> None:
        super().__init__(cursor, facts)
        #: Device expressions each function or lambda moves data to.
        self._code_devices: dict[Code, list[Device]] = {}
        #: ``device=`` arguments (``main(device="cuda:0")``): evidence of CUDA only.
        self._passed: list[Device] = []

    def _current(self) -> list[Code]:
        """The innermost lambda and the enclosing function, which both see a use."""
        cursor = self.cursor
        out: list[Code] = []
        if cursor.lambdas:
            out.append(cursor.lambdas[-1])
        fn = cursor.function
        if fn is not None:
            out.append(fn)
        return out

    def _cuda_here(self) -> None:
        self.facts.cuda_code.update(self._current())

    def _device_here(self, device: cst.BaseExpression) -> None:
        for code in self._current():
            self._code_devices.setdefault(code, []).append((device, self.cursor.scope))

    def visit_Call(self, node: cst.Call) -> None:
        facts, cursor = self.facts, self.cursor
        qualified = cursor.qualified
        if qualified == "torch.distributed.init_process_group":
            backend = node.args[0].value if node.args and node.args[0].keyword is None else None
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "backend":
                    backend = arg.value
            if backend is not None and evaluate(backend, cursor.scope) == "nccl":
                facts.cuda = True
        elif qualified == "torch.device":
            facts.devices.append((node, cursor.scope))
        elif qualified in XLA_DEVICE_CALLS:
            facts.xla = True
        elif qualified == "torch.nn.parallel.DistributedDataParallel":
            # ``device_ids`` name CUDA devices.
            if any(a.keyword is not None and a.keyword.value == "device_ids" and evaluate(a.value, cursor.scope) is not None
                   for a in node.args):
                facts.cuda = True
        elif qualified in LIGHTNING_TRAINERS and not in_test(cursor):
            if lightning_accelerator(node, cursor.scope) is not None:
                facts.cuda = True
        elif qualified in _XLA_LOADERS:
            facts.xla_loader = True
        elif _uses_cuda(qualified):
            facts.cuda = True
        func = node.func
        if cuda_tensor_type(node, cursor.imports):
            facts.cuda = True
            self._cuda_here()
        elif type(func) is cst.Attribute and func.attr.value in TRANSFER_METHODS:
            method = func.attr.value
            if method == "cuda":
                facts.cuda = True
                self._cuda_here()
            elif method == "to":
                device, _ = transfer_device(node, method, cursor.scope)
                if device is not None:
                    facts.devices.append((device, cursor.scope))
                    self._device_here(device)
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "device":
                self._device_here(arg.value)
                self._passed.append((arg.value, cursor.scope))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        cursor = self.cursor
        if not (cursor.lambdas or cursor.functions):
            return
        root = node.value
        while type(root) is cst.Attribute:
            root = root.value
        # Only a chain from an imported name qualifies (most are ``self.x``): spelling it costs more.
        if type(root) is cst.Name and root.value in cursor.imports.names and _uses_cuda(cursor.qualify(node)):
            self._cuda_here()

    def finish(self, module: cst.Module, text: str | None) -> None:
        facts, imports = self.facts, self.cursor.imports
        for expr, scope in facts.devices:
            kind = device_kind(expr, scope, imports)
            if kind in ("cuda", "accelerator"):
                facts.cuda = True
            elif kind == "cpu":
                facts.cpu_device = True
            elif kind == "xla":
                facts.xla = True
        if not facts.cuda:
            facts.cuda = any(device_kind(e, s, imports) == "cuda" for e, s in self._passed)
        for code, devices in self._code_devices.items():
            if code not in facts.cuda_code and any(device_kind(e, s, imports) == "cuda" for e, s in devices):
                facts.cuda_code.add(code)


#: What may name a device's string (exact types: ``isinstance`` against libcst's classes is slow).
_STRINGS = frozenset({cst.SimpleString, cst.ConcatenatedString, cst.Attribute, cst.Subscript})


def device_kind(
    node: cst.BaseExpression | None, scope: Scope | None, imports: ImportTable, depth: int = 0, at: Point | None = None,
) -> str | None:
    """"cuda", "cpu", "xla", "accelerator" or None (unknown) for a device expression.

    A device chosen at run time between CUDA and the CPU (``"cuda" if
    available else "cpu"``) counts as CUDA: the code is written for a GPU.
    Read at ``at`` (a program point), a name is bound only by the bindings
    that may run before it (``resolve.reaches``).
    """
    if node is None or depth > 8:
        return None
    # A string, or a command-line default (``--device cuda``).
    value = evaluate(node, scope) if type(node) in _STRINGS else None
    if isinstance(value, str):
        return _device_string(value)
    if type(node) is cst.FormattedString:
        head = "".join(p.value for p in node.parts if type(p) is cst.FormattedStringText)
        return _device_string(head)
    if type(node) is cst.IfExp:
        return _strongest({device_kind(node.body, scope, imports, depth + 1, at),
                           device_kind(node.orelse, scope, imports, depth + 1, at)}, True)
    if type(node) is cst.Name:
        # A device chosen in branches (``if use_accel: device = ...``) has
        # several bindings: the accelerator one is the evidence that counts.
        found = scope.lookup(node.value) if scope is not None else None
        if found is None:
            return None
        owner, bindings = found
        if len(bindings) > MAX_REACHING:
            return None  # a name bound this often (generated code): unknown, and each read stays cheap
        if at is not None:
            bindings = reaching(bindings, at)
        kinds = {device_kind(b.value, owner, imports, depth + 1, b.point) for b in bindings if b.value is not None}
        return _strongest(kinds, bool(bindings) and all(b.value is not None for b in bindings))
    if type(node) is cst.Call:
        qualified = canonical(imports.qualify(node.func))
        if qualified == "torch.device" and node.args:
            return device_kind(node.args[0].value, scope, imports, depth + 1, at)
        if qualified in ("torch.accelerator.current_accelerator",):
            return "accelerator"
        if qualified in XLA_DEVICE_CALLS:
            return "xla"
    if type(node) is cst.Attribute:
        if node.attr.value == "device" and _accelerate_device(node.value, scope, imports):
            return "accelerator"
        # torch.accelerator.current_accelerator().type and the like
        inner = node.value
        current = "torch.accelerator.current_accelerator"
        if type(inner) is cst.Call and canonical(imports.qualify(inner.func)) == current:
            return "accelerator"
    return None


def _accelerate_device(node: cst.BaseExpression, scope: Scope | None, imports: ImportTable) -> bool:
    """``accelerator.device`` of an ``accelerate.Accelerator()`` not forced onto the CPU."""
    target, _ = follow_name(node, scope)
    if type(target) is not cst.Call or canonical(imports.qualify(target.func)) not in _ACCELERATORS:
        return False
    return not any(a.keyword is not None and a.keyword.value in ("cpu", "use_cpu") for a in target.args)


def _strongest(kinds: set[str | None], all_known: bool) -> str | None:
    for kind in ("cuda", "accelerator", "xla"):
        if kind in kinds:
            return kind
    return "cpu" if kinds == {"cpu"} and all_known else None


def _device_string(value: str) -> str | None:
    head = value.split(":", 1)[0].strip().lower()
    if head in ("cuda", "cpu", "xla"):
        return head
    if head in ("mps", "xpu", "npu", "hpu"):
        return "other"
    return None
