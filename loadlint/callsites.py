"""Step 4: one traversal per file collects every DataLoader call site and the
context the rules need (distributed setup, accelerator use, epoch loops,
Dataset classes).

The visitor only records; everything that needs the whole file (a name bound
after its use, a device variable assigned below) is decided afterwards from
the records, without a second pass over the tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

import libcst as cst

from loadlint.walk import walk

from loadlint.signature import DATALOADER, DEFAULTS, POSITIONAL
from loadlint.resolve import (
    MISSING,
    UNKNOWN,
    DictMutation,
    ImportTable,
    Scope,
    canonical,
    dotted_name,
    evaluate,
    follow_name,
)

_DISTRIBUTED_CALLS = {
    "torch.distributed.init_process_group",
    "torch.nn.parallel.DistributedDataParallel",
    "torch.multiprocessing.spawn",
    "torch.distributed.get_rank",
    "torch.distributed.get_world_size",
    "torch.distributed.launcher.api.elastic_launch",
    "torch.distributed.elastic.multiprocessing.errors.record",
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_shard",
}
_DIST_ENV = {"LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "RANK"}
_FRAMEWORK_CALLS = {
    "lightning.Trainer": "Lightning",
    "lightning.pytorch.Trainer": "Lightning",
    "pytorch_lightning.Trainer": "Lightning",
    "lightning.fabric.Fabric": "Lightning Fabric",
    "lightning.Fabric": "Lightning Fabric",
    "accelerate.Accelerator": "accelerate",
    "transformers.Trainer": "Hugging Face Trainer",
    "transformers.Seq2SeqTrainer": "Hugging Face Trainer",
    "trl.SFTTrainer": "Hugging Face Trainer",
    "ray.train.torch.prepare_data_loader": "Ray Train",
}
_LIGHTNING_BASES = ("LightningModule", "LightningDataModule")
_LIGHTNING_HOOKS = {"train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader"}
_ITER_WRAPPERS = {"enumerate", "tqdm", "trange", "zip", "iter", "islice", "track", "chain"}
_CPU_COUNT_CALLS = {"os.cpu_count", "multiprocessing.cpu_count", "psutil.cpu_count"}
_RNG_CALLS = {
    "numpy.random.default_rng",
    "numpy.random.RandomState",
    "numpy.random.Generator",
    "random.Random",
    "torch.Generator",
}
_ITERABLE_BASES = {
    "torch.utils.data.IterableDataset",
    "torch.utils.data.IterDataPipe",
    "torch.utils.data.datapipes.datapipe.IterDataPipe",
    "datasets.IterableDataset",
    "webdataset.WebDataset",
}
_MAP_BASES = {"torch.utils.data.Dataset", "torch.utils.data.TensorDataset"}
_DATASET_METHODS = {"__init__", "__getitem__", "__getitems__", "__iter__", "__len__"}
_XLA_DEVICE_CALLS = {"torch_xla.core.xla_model.xla_device", "torch_xla.device"}
_XLA_LOADERS = {
    "torch_xla.distributed.parallel_loader.MpDeviceLoader",
    "torch_xla.distributed.parallel_loader.ParallelLoader",
}

#: Asking about CUDA is not using it.
_CUDA_QUERIES = {"torch.cuda.is_available", "torch.cuda.device_count", "torch.cuda.is_initialized"}

Key = tuple[int, str]


def _is_main_guard(test: cst.BaseExpression) -> bool:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    left, right = test.left, test.comparisons[0].comparator
    if not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    names = {dotted_name(left), dotted_name(right)}
    strings = {
        n.evaluated_value for n in (left, right) if isinstance(n, cst.SimpleString)
    }
    return "__name__" in names and "__main__" in strings


@dataclass(eq=False)
class LoopFrame:
    node: cst.For | cst.While
    targets: frozenset[str]
    #: Loader keys this loop iterates directly.
    iterates: list[Key] = field(default_factory=list)
    var: str | None = None


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


@dataclass(eq=False)
class FunctionFacts:
    name: str
    node: cst.FunctionDef
    scope: Scope
    nested: bool
    class_name: str | None
    params: list[str] = field(default_factory=list)
    iterated_params: set[str] = field(default_factory=set)
    cuda: bool = False
    cuda_devices: list[tuple[cst.BaseExpression, Scope]] = field(default_factory=list)
    calls_get_worker_info: bool = False
    self_attrs_used: set[str] = field(default_factory=set)
    names_used: set[str] = field(default_factory=set)
    rng_attrs: set[str] = field(default_factory=set)


@dataclass(eq=False)
class LambdaFacts:
    node: cst.Lambda
    #: The scope the lambda is written in (its free names resolve there).
    scope: Scope
    params: set[str] = field(default_factory=set)
    names_used: set[str] = field(default_factory=set)
    cuda: bool = False
    cuda_devices: list[tuple[cst.BaseExpression, Scope]] = field(default_factory=list)


@dataclass(eq=False)
class ClassFacts:
    name: str
    node: cst.ClassDef
    bases: list[str]
    nested: bool
    methods: dict[str, FunctionFacts] = field(default_factory=dict)


@dataclass(eq=False)
class SamplerCall:
    node: cst.Call
    scope: Scope
    key: Key | None


@dataclass(eq=False)
class LoaderCall:
    """One ``DataLoader(...)`` construction, arguments mapped to parameters."""

    node: cst.Call
    scope: Scope
    args: dict[str, cst.Arg]
    #: Keys resolved from ``**name`` dicts: parameter -> expression (None = unknown value).
    dict_args: dict[str, tuple[cst.BaseExpression | None, Scope]]
    #: An unresolved ``**kwargs`` or ``*args`` may hide any argument.
    opaque_kwargs: bool
    opaque_positional: bool
    key: Key | None
    loops: tuple[LoopFrame, ...]
    function: str | None
    class_name: str | None
    returned_from: str | None

    def expr(self, name: str) -> cst.BaseExpression | None:
        arg = self.args.get(name)
        if arg is not None:
            return arg.value
        entry = self.dict_args.get(name)
        return entry[0] if entry else None

    def value(self, name: str) -> Any:
        """The argument's value, MISSING when certainly absent, else UNKNOWN."""
        arg = self.args.get(name)
        if arg is not None:
            return evaluate(arg.value, self.scope)
        entry = self.dict_args.get(name)
        if entry is not None:
            return UNKNOWN if entry[0] is None else evaluate(entry[0], entry[1])
        if self.opaque_kwargs or (self.opaque_positional and name in POSITIONAL):
            return UNKNOWN
        return MISSING

    def effective(self, name: str) -> Any:
        """Like value(), with a missing argument replaced by torch's default."""
        value = self.value(name)
        return DEFAULTS[name] if value is MISSING else value

    def workers(self) -> Any:
        return self.effective("num_workers")


@dataclass
class ModuleInfo:
    calls: list[LoaderCall] = field(default_factory=list)
    distributed: list[str] = field(default_factory=list)
    frameworks: set[str] = field(default_factory=set)
    cuda: bool = False
    cpu_device: bool = False
    devices: list[tuple[cst.BaseExpression, Scope]] = field(default_factory=list)
    xla: bool = False
    xla_loader: bool = False
    set_epoch_called: bool = False
    classes: dict[str, ClassFacts] = field(default_factory=dict)
    functions: list[FunctionFacts] = field(default_factory=list)
    iterations: list[Iteration] = field(default_factory=list)
    transfers: list[Transfer] = field(default_factory=list)
    samplers: list[SamplerCall] = field(default_factory=list)
    next_iter: list[tuple[cst.Call, Key, bool]] = field(default_factory=list)
    attr_assignments: list[tuple[cst.Attribute, Key, str]] = field(default_factory=list)
    cpu_count_calls: set[int] = field(default_factory=set)
    #: Function name -> loop frames it is called from inside of.
    called_in_loop: dict[str, list[LoopFrame]] = field(default_factory=dict)
    #: (callee name, loop frames, {param index or name: loader key})
    loader_passes: list[tuple[str, tuple[LoopFrame, ...], dict[int | str, Key]]] = field(default_factory=list)
    aliases: dict[Key, Key] = field(default_factory=dict)
    module_rngs: set[str] = field(default_factory=set)
    start_methods: set[str] = field(default_factory=set)
    imports: ImportTable = field(default_factory=ImportTable)
    module_scope: Scope = field(default_factory=lambda: Scope("module", None))
    is_notebook: bool = False
    #: Every ``def``, keyed by (id of the scope it binds in, name).
    defs: dict[Key, FunctionFacts] = field(default_factory=dict)
    #: Every ``class``, keyed the same way (local classes are not picklable).
    class_defs: dict[Key, ClassFacts] = field(default_factory=dict)
    #: Every lambda, by id of its node.
    lambdas: dict[int, LambdaFacts] = field(default_factory=dict)
    #: ids of calls with a lambda anywhere inside their arguments.
    calls_with_lambda: set[int] = field(default_factory=set)
    #: Names read inside the arguments of constructor-like calls (a
    #: capitalised callee, or DataLoader itself), by id of the call.
    call_names: dict[int, set[str]] = field(default_factory=dict)
    #: id of an attribute-assignment target -> the whole assignment.
    attr_assign_nodes: dict[int, cst.CSTNode] = field(default_factory=dict)

    # -- derived facts ----------------------------------------------------

    def keys_of(self, call: LoaderCall) -> set[Key]:
        """Every key through which the loader is reachable (aliases included)."""
        if call.key is None:
            return set()
        keys = {call.key}
        changed = True
        while changed:
            changed = False
            for alias, target in self.aliases.items():
                if target in keys and alias not in keys:
                    keys.add(alias)
                    changed = True
        return keys

    def epoch_uses(self, call: LoaderCall) -> list[tuple[LoopFrame, Iteration | None]]:
        """The loops in which this loader is iterated once per pass (epochs)."""
        uses: list[tuple[LoopFrame, Iteration | None]] = []
        keys = self.keys_of(call)
        if not keys:
            return uses
        for it in self.iterations:
            if it.key not in keys:
                continue
            if it.outer:
                uses.append((it.outer[-1], it))
            else:
                fn = it.scope.function
                for frame in self.called_in_loop.get(fn.name, ()):
                    uses.append((frame, None))
        for callee, frames, passed in self.loader_passes:
            if not frames:
                continue
            fn = self._function_named(callee)
            if fn is None:
                continue
            for slot, key in passed.items():
                if key not in keys:
                    continue
                param = fn.params[slot] if isinstance(slot, int) and slot < len(fn.params) else slot
                if param in fn.iterated_params:
                    uses.append((frames[-1], None))
        return uses

    def lightning_hook(self, call: LoaderCall) -> bool:
        if call.returned_from not in _LIGHTNING_HOOKS or call.class_name is None:
            return False
        cls = self.classes.get(call.class_name)
        return cls is not None and any(b.endswith(_LIGHTNING_BASES) for b in cls.bases)

    def definition(self, name: str, scope: Scope) -> FunctionFacts | ClassFacts | None:
        """The ``def`` or ``class`` a name refers to from ``scope``, when it is
        bound exactly once (by that definition)."""
        found = scope.lookup(name)
        if found is None:
            return None
        owner, bindings = found
        if len(bindings) != 1:
            return None
        key = (id(owner), name)
        return self.defs.get(key) or self.class_defs.get(key)

    def _function_named(self, name: str) -> FunctionFacts | None:
        for fn in self.functions:
            if fn.name == name and not fn.nested:
                return fn
        return None

    def dataset_class(self, call: LoaderCall) -> tuple[str | None, ClassFacts | None]:
        """(qualified name, local class facts) of the dataset argument's constructor."""
        expr = call.expr("dataset")
        if expr is None:
            return None, None
        expr, scope = follow_name(expr, call.scope)
        if not isinstance(expr, cst.Call):
            return None, None
        local = expr.func.value if isinstance(expr.func, cst.Name) else None
        if local is not None and local in self.classes:
            return local, self.classes[local]
        return canonical(self.imports.qualify(expr.func)), None

    def class_bases(self, cls: ClassFacts, depth: int = 0) -> set[str]:
        """Qualified bases of a local class, following local base classes."""
        out: set[str] = set()
        for base in cls.bases:
            out.add(base)
            if base in self.classes and depth < 10 and base != cls.name:
                out |= self.class_bases(self.classes[base], depth + 1)
        return out

    def is_iterable_dataset(self, call: LoaderCall) -> bool | None:
        """True/False when the dataset's kind is known, None when it is not."""
        qualified, cls = self.dataset_class(call)
        if cls is not None:
            bases = self.class_bases(cls)
            if bases & _ITERABLE_BASES:
                return True
            if bases & _MAP_BASES or "__getitem__" in cls.methods:
                return False
            return None
        if qualified in _ITERABLE_BASES:
            return True
        if qualified in _MAP_BASES:
            return False
        return None

    def is_tensor_dataset(self, call: LoaderCall) -> bool:
        qualified, _ = self.dataset_class(call)
        return qualified == "torch.utils.data.TensorDataset"


class Collector(cst.CSTVisitor):
    """The single pass over a module."""

    def __init__(self) -> None:
        self.info = ModuleInfo()
        self.imports = self.info.imports
        self.scope: Scope = self.info.module_scope
        self.loops: list[LoopFrame] = []
        self.path: list[int] = []
        self.order = 0
        self.functions: list[FunctionFacts] = []
        self.classes: list[ClassFacts] = []
        self.main_guard_depth = 0
        self.pending_targets: dict[int, list[cst.BaseExpression]] = {}
        self.pending_return: set[int] = set()
        self.saved: list[tuple[list[LoopFrame], list[int]]] = []
        self.lambdas: list[LambdaFacts] = []
        #: Calls being visited, innermost last, and whether each records names.
        self.open_calls: list[tuple[cst.Call, set[str] | None]] = []

    # -- helpers ----------------------------------------------------------

    def qualify(self, node: cst.BaseExpression) -> str | None:
        return canonical(self.imports.qualify(node))

    def key_of(self, node: cst.BaseExpression) -> Key | None:
        """A stable identity for a loader variable: (owning scope id, dotted name)."""
        if isinstance(node, cst.Name):
            found = self.scope.lookup(node.value)
            owner = found[0] if found else self.scope.function
            return (id(owner), node.value)
        dotted = dotted_name(node)
        if dotted is not None and dotted.startswith("self.") and self.classes:
            return (id(self.classes[-1]), dotted)
        return None

    def _bind_target(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if isinstance(target, cst.Name):
            self.scope.bind(target.value, value, tuple(self.path), self.order)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                inner = element.value
                if isinstance(inner, cst.StarredElement):
                    inner = inner.value
                self._bind_target(inner, None)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value, None)

    @property
    def function(self) -> FunctionFacts | None:
        return self.functions[-1] if self.functions else None

    # -- imports and definitions ----------------------------------------

    def visit_Import(self, node: cst.Import) -> None:
        self.imports.add_import(node)
        for alias in node.names:
            name = alias.asname.name if alias.asname else alias.name
            while isinstance(name, cst.Attribute):
                name = name.value
            if isinstance(name, cst.Name):
                self.scope.bind(name.value, None)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.imports.add_import_from(node)
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = alias.asname.name if alias.asname else alias.name
            if isinstance(name, cst.Name):
                self.scope.bind(name.value, None)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if self.scope.kind == "module":
            self.imports.shadow(node.name.value)
        self.scope.bind(node.name.value, None)
        bases = []
        for arg in node.bases:
            if isinstance(arg.value, cst.Name) and arg.value.value in self.info.classes:
                bases.append(arg.value.value)
            else:
                bases.append(self.qualify(arg.value) or dotted_name(arg.value) or "")
        facts = ClassFacts(node.name.value, node, bases, nested=bool(self.functions))
        self.info.classes.setdefault(node.name.value, facts)
        self.info.class_defs[(id(self.scope), node.name.value)] = facts
        self.classes.append(facts)
        self.scope = Scope("class", self.scope, node.name.value)
        for base in bases:
            if base.endswith(_LIGHTNING_BASES):
                self.info.frameworks.add("Lightning")

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.classes.pop()
        self.scope = self.scope.parent  # type: ignore[assignment]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.scope.kind == "module":
            self.imports.shadow(node.name.value)
        self.scope.bind(node.name.value, None)
        in_class = self.scope.kind == "class"
        scope = Scope("function", self.scope, node.name.value)
        params = []
        for param in (*node.params.posonly_params, *node.params.params):
            params.append(param.name.value)
        if in_class and params:
            params = params[1:]  # self/cls is not passed explicitly
        for param in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params):
            scope.bind(param.name.value, None)
        for star in (node.params.star_arg, node.params.star_kwarg):
            if isinstance(star, cst.Param):
                scope.bind(star.name.value, None)
        facts = FunctionFacts(
            node.name.value,
            node,
            scope,
            nested=bool(self.functions),
            class_name=self.classes[-1].name if in_class and self.classes else None,
            params=params,
        )
        if in_class and self.classes:
            self.classes[-1].methods.setdefault(node.name.value, facts)
        self.info.defs[(id(self.scope), node.name.value)] = facts
        self.functions.append(facts)
        self.info.functions.append(facts)
        self.scope = scope
        self.saved.append((self.loops, self.path))
        self.loops, self.path = [], []

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.functions.pop()
        self.scope = self.scope.parent  # type: ignore[assignment]
        self.loops, self.path = self.saved.pop()

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        params = node.params
        names = {
            p.name.value
            for p in (*params.posonly_params, *params.params, *params.kwonly_params)
        }
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                names.add(star.name.value)
        facts = LambdaFacts(node, self.scope, names)
        self.info.lambdas[id(node)] = facts
        self.lambdas.append(facts)
        for call, _ in self.open_calls:
            self.info.calls_with_lambda.add(id(call))
        return True

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self.lambdas.pop()

    def visit_Global(self, node: cst.Global) -> None:
        for item in node.names:
            self.scope.globals_.add(item.name.value)
            self.info.module_scope.bind(item.name.value, None)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        for item in node.names:
            found = self.scope.parent.lookup(item.name.value) if self.scope.parent else None
            if found:
                found[0].bind(item.name.value, None)

    # -- control flow -----------------------------------------------------

    def _enter_block(self, node: cst.CSTNode) -> None:
        self.path.append(id(node))

    def _leave_block(self) -> None:
        if self.path:
            self.path.pop()

    def visit_If(self, node: cst.If) -> None:
        self._enter_block(node)
        if _is_main_guard(node.test):
            self.main_guard_depth += 1

    def leave_If(self, original_node: cst.If) -> None:
        self._leave_block()
        if _is_main_guard(original_node.test):
            self.main_guard_depth -= 1

    def visit_Try(self, node: cst.Try) -> None:
        self._enter_block(node)

    def leave_Try(self, original_node: cst.Try) -> None:
        self._leave_block()

    def visit_Match(self, node: cst.Match) -> None:
        self._enter_block(node)

    def leave_Match(self, original_node: cst.Match) -> None:
        self._leave_block()

    def _iterated_keys(self, node: cst.BaseExpression) -> list[Key]:
        """Loader keys iterated by ``for _ in node`` (wrappers unwrapped)."""
        if isinstance(node, cst.Call):
            name = dotted_name(node.func) or ""
            if name.rsplit(".", 1)[-1] in _ITER_WRAPPERS:
                keys: list[Key] = []
                args = node.args if name.endswith(("zip", "chain")) else node.args[:1]
                for arg in args:
                    if arg.keyword is None and arg.star == "":
                        keys.extend(self._iterated_keys(arg.value))
                return keys
            return []
        key = self.key_of(node)
        return [key] if key is not None else []

    def visit_For(self, node: cst.For) -> None:
        self._bind_target(node.target, None)
        targets = frozenset(_names_in(node.target))
        frame = LoopFrame(node, targets, var=node.target.value if isinstance(node.target, cst.Name) else None)
        for key in self._iterated_keys(node.iter):
            frame.iterates.append(key)
            self.info.iterations.append(
                Iteration(
                    key,
                    node,
                    self.scope,
                    tuple(self.loops),
                    at_module_level=not self.functions,
                    in_main_guard=self.main_guard_depth > 0,
                )
            )
            fn = self.function
            if fn is not None and key[0] == id(fn.scope) and key[1] in fn.params:
                fn.iterated_params.add(key[1])
        self._pending_frame = frame
        self._enter_block(node)

    def visit_For_body(self, node: cst.For) -> None:
        self.loops.append(self._pending_frame)

    def leave_For_body(self, node: cst.For) -> None:
        self.loops.pop()

    def leave_For(self, original_node: cst.For) -> None:
        self._leave_block()

    def visit_While(self, node: cst.While) -> None:
        self._enter_block(node)

    def visit_While_body(self, node: cst.While) -> None:
        self.loops.append(LoopFrame(node, frozenset()))

    def leave_While_body(self, node: cst.While) -> None:
        self.loops.pop()

    def leave_While(self, original_node: cst.While) -> None:
        self._leave_block()

    # -- bindings -----------------------------------------------------------

    def visit_Assign(self, node: cst.Assign) -> None:
        self.order += 1
        single = len(node.targets) == 1
        for target in node.targets:
            t = target.target
            self._bind_target(t, node.value if single and isinstance(t, cst.Name) else None)
            if isinstance(t, cst.Subscript):
                self._record_setitem(t, node.value)
            elif isinstance(t, cst.Attribute):
                self._record_attr_assign(t)
                self.info.attr_assign_nodes[id(t)] = node
        if isinstance(node.value, cst.Call):
            self.pending_targets[id(node.value)] = [t.target for t in node.targets]
            self._record_prepare_alias(node)
        # ``rng = np.random.default_rng()`` at module level
        if not self.functions and isinstance(node.value, cst.Call):
            if self.qualify(node.value.func) in _RNG_CALLS:
                for target in node.targets:
                    if isinstance(target.target, cst.Name):
                        self.info.module_rngs.add(target.target.value)
        fn = self.function
        if fn is not None and fn.name == "__init__" and isinstance(node.value, cst.Call):
            if self.qualify(node.value.func) in _RNG_CALLS:
                for target in node.targets:
                    dotted = dotted_name(target.target)
                    if dotted and dotted.startswith("self."):
                        fn.rng_attrs.add(dotted[5:])

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.order += 1
        self._bind_target(node.target, node.value if isinstance(node.target, cst.Name) else None)
        if isinstance(node.value, cst.Call):
            self.pending_targets[id(node.value)] = [node.target]
        if isinstance(node.target, cst.Attribute):
            self._record_attr_assign(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.order += 1
        self._bind_target(node.target, None)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind_target(node.target, None)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._bind_target(node.asname.name, None)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self._bind_target(node.name.name, None)

    def visit_Del(self, node: cst.Del) -> None:
        target = node.target
        if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
            self._mutate(target.value.value, DictMutation("other", None, None, tuple(self.path), self.order))
        self._bind_target(target, None)

    def visit_Return(self, node: cst.Return) -> None:
        if isinstance(node.value, cst.Call):
            self.pending_return.add(id(node.value))

    def _mutate(self, name: str, mutation: DictMutation) -> None:
        found = self.scope.lookup(name)
        owner = found[0] if found else self.scope
        owner.dict_mutations.setdefault(name, []).append(mutation)

    def _record_setitem(self, target: cst.Subscript, value: cst.BaseExpression) -> None:
        if not isinstance(target.value, cst.Name):
            return
        key = None
        if len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index):
            k = target.slice[0].slice.value
            if isinstance(k, cst.SimpleString):
                key = k.evaluated_value
        self._mutate(
            target.value.value,
            DictMutation("setitem" if key else "other", value, key, tuple(self.path), self.order),
        )

    def _record_attr_assign(self, target: cst.Attribute) -> None:
        key = self.key_of(target.value)
        if key is not None:
            self.info.attr_assignments.append((target, key, target.attr.value))

    def _record_prepare_alias(self, node: cst.Assign) -> None:
        # ``model, opt, loader = accelerator.prepare(model, opt, loader)``
        call = node.value
        assert isinstance(call, cst.Call)
        if not (isinstance(call.func, cst.Attribute) and call.func.attr.value in ("prepare", "prepare_data_loader")):
            return
        sources = [self.key_of(a.value) if a.keyword is None and not a.star else None for a in call.args]
        for target in node.targets:
            t = target.target
            dests = [e.value for e in t.elements] if isinstance(t, (cst.Tuple, cst.List)) else [t]
            if len(dests) != len(sources):
                continue
            for dest, source in zip(dests, sources):
                dest_key = self.key_of(dest)
                if dest_key is not None and source is not None and dest_key != source:
                    self.info.aliases[dest_key] = source

    # -- expressions ------------------------------------------------------

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if self.qualify(node.value) == "os.environ" and len(node.slice) == 1:
            index = node.slice[0].slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
                if index.value.evaluated_value in _DIST_ENV:
                    self.info.distributed.append(f"os.environ[{index.value.value}]")

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self.lambdas:
            qualified = self.qualify(node)
            if qualified and qualified.startswith("torch.cuda.") and qualified not in _CUDA_QUERIES:
                self.lambdas[-1].cuda = True
        fn = self.function
        if fn is None:
            return
        if fn.class_name is not None and isinstance(node.value, cst.Name) and node.value.value == "self":
            fn.self_attrs_used.add(node.attr.value)
        qualified = self.qualify(node)
        if qualified and qualified.startswith("torch.cuda.") and qualified not in _CUDA_QUERIES:
            fn.cuda = True

    def visit_Name(self, node: cst.Name) -> None:
        fn = self.function
        if fn is not None:
            fn.names_used.add(node.value)
        if self.lambdas:
            self.lambdas[-1].names_used.add(node.value)
        for _, names in self.open_calls:
            if names is not None:
                names.add(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        self.order += 1
        qualified = self.qualify(node.func)
        if qualified == DATALOADER:
            self._record_loader(node)
        elif qualified is not None:
            self._record_qualified_call(node, qualified)
        func = node.func
        # Names are kept only for constructor-like calls: datasets, transforms
        # and the loader itself, which is what the rules ask about.
        callee = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        names: set[str] | None = None
        if qualified == DATALOADER or callee[:1].isupper():
            names = self.info.call_names.setdefault(id(node), set())
        self.open_calls.append((node, names))
        if isinstance(func, cst.Attribute):
            self._record_method_call(node, func)
        elif isinstance(func, cst.Name):
            self._record_plain_call(node, func.value)
        fn = self.function
        if self.lambdas:
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "device":
                    self.lambdas[-1].cuda_devices.append((arg.value, self.scope))
        if fn is not None:
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "device":
                    fn.cuda_devices.append((arg.value, self.scope))
            if qualified is not None and qualified.endswith("get_worker_info"):
                fn.calls_get_worker_info = True
            if isinstance(func, cst.Name) and func.value in ("get_worker_info", "split_dataset_by_node"):
                fn.calls_get_worker_info = True

    def leave_Call(self, original_node: cst.Call) -> None:
        self.open_calls.pop()

    def _record_qualified_call(self, node: cst.Call, qualified: str) -> None:
        info = self.info
        if qualified in _DISTRIBUTED_CALLS:
            info.distributed.append(qualified)
            if qualified == "torch.distributed.init_process_group":
                backend = node.args[0].value if node.args and node.args[0].keyword is None else None
                for arg in node.args:
                    if arg.keyword is not None and arg.keyword.value == "backend":
                        backend = arg.value
                if backend is not None and evaluate(backend, self.scope) == "nccl":
                    info.cuda = True
        elif qualified in _FRAMEWORK_CALLS:
            info.frameworks.add(_FRAMEWORK_CALLS[qualified])
        elif qualified in ("os.environ.get", "os.getenv"):
            if node.args and isinstance(node.args[0].value, cst.SimpleString):
                if node.args[0].value.evaluated_value in _DIST_ENV:
                    info.distributed.append(f"{qualified}({node.args[0].value.value})")
        elif qualified == "torch.device":
            info.devices.append((node, self.scope))
        elif qualified in ("torch.utils.data.DistributedSampler",):
            targets = self.pending_targets.get(id(node))
            key = self.key_of(targets[0]) if targets and len(targets) == 1 else None
            info.samplers.append(SamplerCall(node, self.scope, key))
        elif qualified in _CPU_COUNT_CALLS:
            info.cpu_count_calls.add(id(node))
        elif qualified in _XLA_DEVICE_CALLS:
            info.xla = True
        elif qualified in _XLA_LOADERS:
            info.xla_loader = True
        elif qualified in ("multiprocessing.set_start_method", "torch.multiprocessing.set_start_method"):
            if node.args:
                method = evaluate(node.args[0].value, self.scope)
                if isinstance(method, str):
                    info.start_methods.add(method)
        elif qualified.startswith("torch.cuda.") and qualified not in _CUDA_QUERIES:
            info.cuda = True

    def _record_method_call(self, node: cst.Call, func: cst.Attribute) -> None:
        method = func.attr.value
        info = self.info
        if method == "set_epoch":
            info.set_epoch_called = True
            return
        if method == "update" and isinstance(func.value, cst.Name):
            value = node.args[0].value if len(node.args) == 1 and node.args[0].keyword is None else None
            self._mutate(func.value.value, DictMutation("update" if value is not None else "other", value, None, tuple(self.path), self.order))
            return
        if method in ("pop", "setdefault", "clear", "popitem") and isinstance(func.value, cst.Name):
            self._mutate(func.value.value, DictMutation("other", None, None, tuple(self.path), self.order))
            return
        if method in ("to", "cuda", "pin_memory"):
            device = None
            non_blocking = False
            if method == "to":
                for i, arg in enumerate(node.args):
                    if arg.keyword is None and i == 0:
                        device = arg.value
                    elif arg.keyword is not None and arg.keyword.value == "device":
                        device = arg.value
                    elif arg.keyword is not None and arg.keyword.value == "non_blocking":
                        non_blocking = evaluate(arg.value, self.scope) is not False
            else:
                non_blocking = any(
                    a.keyword is not None and a.keyword.value == "non_blocking" and evaluate(a.value, self.scope) is not False
                    for a in node.args
                )
            if method == "cuda":
                info.cuda = True
            elif method == "to" and device is not None:
                info.devices.append((device, self.scope))
            fn = self.function
            if fn is not None:
                if method == "cuda":
                    fn.cuda = True
                elif device is not None:
                    fn.cuda_devices.append((device, self.scope))
            if self.lambdas:
                if method == "cuda":
                    self.lambdas[-1].cuda = True
                elif device is not None:
                    self.lambdas[-1].cuda_devices.append((device, self.scope))
            root = _root_name(func.value)
            if root is not None:
                for frame in reversed(self.loops):
                    if root in frame.targets and frame.iterates:
                        info.transfers.append(
                            Transfer(node, method, frame.iterates[0], device, self.scope, non_blocking)
                        )
                        break
            return
        # A function called from inside a loop: ``self._run_epoch(epoch)``
        if self.loops and isinstance(func.value, cst.Name) and func.value.value == "self":
            info.called_in_loop.setdefault(method, []).append(self.loops[-1])

    def _record_plain_call(self, node: cst.Call, name: str) -> None:
        info = self.info
        if name == "next" and node.args and isinstance(node.args[0].value, cst.Call):
            inner = node.args[0].value
            if dotted_name(inner.func) == "iter" and inner.args:
                key = self.key_of(inner.args[0].value)
                if key is not None:
                    info.next_iter.append((node, key, bool(self.loops)))
            return
        if self.loops:
            info.called_in_loop.setdefault(name, []).append(self.loops[-1])
        passed: dict[int | str, Key] = {}
        for i, arg in enumerate(node.args):
            if arg.star:
                break
            key = self.key_of(arg.value) if isinstance(arg.value, cst.Name) else None
            if key is not None:
                passed[arg.keyword.value if arg.keyword else i] = key
        if passed:
            info.loader_passes.append((name, tuple(self.loops), passed))

    def _record_loader(self, node: cst.Call) -> None:
        args: dict[str, cst.Arg] = {}
        dict_args: dict[str, tuple[cst.BaseExpression | None, Scope]] = {}
        opaque_kwargs = opaque_positional = False
        position = 0
        for arg in node.args:
            if arg.star == "*":
                opaque_positional = True
            elif arg.star == "**":
                resolved = self._resolve_kwargs_dict(arg.value)
                if resolved is None:
                    opaque_kwargs = True
                else:
                    for name, entry in resolved.items():
                        dict_args[name] = entry
            elif arg.keyword is not None:
                args[arg.keyword.value] = arg
            else:
                if opaque_positional:
                    continue
                if position < len(POSITIONAL):
                    args[POSITIONAL[position]] = arg
                position += 1
        targets = self.pending_targets.get(id(node))
        key = self.key_of(targets[0]) if targets and len(targets) == 1 else None
        fn = self.function
        self.info.calls.append(
            LoaderCall(
                node=node,
                scope=self.scope,
                args=args,
                dict_args=dict_args,
                opaque_kwargs=opaque_kwargs,
                opaque_positional=opaque_positional,
                key=key,
                loops=tuple(self.loops),
                function=fn.name if fn else None,
                class_name=fn.class_name if fn else None,
                returned_from=fn.name if fn and id(node) in self.pending_return else None,
            )
        )

    def _resolve_kwargs_dict(self, node: cst.BaseExpression) -> dict[str, tuple[cst.BaseExpression | None, Scope]] | None:
        """Key-by-key contents of ``**name``, or None when it cannot be known.

        ``name`` must be bound once to a dict literal in this function and
        changed only by ``.update(<dict literal or such a name>)`` and
        ``name["key"] = value`` before the call.  A change made under a
        condition the call is not under makes that key's value unknown (it
        may or may not be there).
        """
        if isinstance(node, cst.Dict):
            return _dict_literal(node, self.scope, conditional=False)
        if not isinstance(node, cst.Name):
            return None
        return self._resolve_dict_name(node.value, self.scope, tuple(self.path), self.order, 0)

    def _resolve_dict_name(self, name: str, scope: Scope, path: tuple[int, ...], order: int, depth: int):
        found = scope.lookup(name)
        if found is None or depth > 5:
            return None
        owner, bindings = found
        if owner.kind != "function" or len(bindings) != 1 or not isinstance(bindings[0].value, cst.Dict):
            return None
        binding = bindings[0]
        result = _dict_literal(binding.value, owner, conditional=False)
        if result is None:
            return None
        for mutation in owner.dict_mutations.get(name, ()):
            if mutation.order > order:
                continue
            conditional = mutation.path != path[: len(mutation.path)]
            if mutation.kind == "other":
                return None
            if mutation.kind == "setitem":
                result[mutation.key] = (None if conditional else mutation.value, owner)
            else:  # update
                value = mutation.value
                if isinstance(value, cst.Dict):
                    extra = _dict_literal(value, owner, conditional)
                elif isinstance(value, cst.Name):
                    extra = self._resolve_dict_name(value.value, owner, mutation.path, mutation.order, depth + 1)
                    if extra is not None and conditional:
                        extra = {k: (None, s) for k, (_, s) in extra.items()}
                else:
                    extra = None
                if extra is None:
                    return None
                result.update(extra)
        return result


def _dict_literal(node: cst.Dict, scope: Scope, conditional: bool):
    out: dict[str, tuple[cst.BaseExpression | None, Scope]] = {}
    for element in node.elements:
        if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
            return None
        out[element.key.evaluated_value] = (None if conditional else element.value, scope)
    return out


def _names_in(target: cst.BaseExpression) -> Iterator[str]:
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _names_in(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _names_in(target.value)


def _root_name(node: cst.BaseExpression) -> str | None:
    while isinstance(node, (cst.Attribute, cst.Subscript, cst.Call)):
        node = node.func if isinstance(node, cst.Call) else node.value
    return node.value if isinstance(node, cst.Name) else None


def collect(module: cst.Module) -> ModuleInfo:
    collector = Collector()
    # Our walker, not module.visit(): libcst's rebuilds every node it passes.
    walk(module, collector)
    info = collector.info
    _settle_devices(info)
    return info


# -- devices ---------------------------------------------------------------

def device_kind(node: cst.BaseExpression | None, scope: Scope | None, imports: ImportTable, depth: int = 0) -> str | None:
    """"cuda", "cpu", "xla", "accelerator" or None (unknown) for a device expression.

    A device chosen at run time between CUDA and the CPU (``"cuda" if
    available else "cpu"``) counts as CUDA: the code is written for a GPU.
    """
    if node is None or depth > 8:
        return None
    value = evaluate(node, scope) if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)) else None
    if isinstance(value, str):
        return _device_string(value)
    if isinstance(node, cst.FormattedString):
        head = "".join(p.value for p in node.parts if isinstance(p, cst.FormattedStringText))
        return _device_string(head)
    if isinstance(node, cst.IfExp):
        kinds = {device_kind(node.body, scope, imports, depth + 1), device_kind(node.orelse, scope, imports, depth + 1)}
        for kind in ("cuda", "accelerator", "xla"):
            if kind in kinds:
                return kind
        return "cpu" if kinds == {"cpu"} else None
    if isinstance(node, cst.Name):
        # A device chosen in branches (``if use_accel: device = ...``) has
        # several bindings: the accelerator one is the evidence that counts.
        found = scope.lookup(node.value) if scope is not None else None
        if found is None:
            return None
        owner, bindings = found
        kinds = {device_kind(b.value, owner, imports, depth + 1) for b in bindings if b.value is not None}
        for kind in ("cuda", "accelerator", "xla"):
            if kind in kinds:
                return kind
        return "cpu" if kinds == {"cpu"} and all(b.value is not None for b in bindings) else None
    if isinstance(node, cst.Call):
        qualified = canonical(imports.qualify(node.func))
        if qualified == "torch.device" and node.args:
            return device_kind(node.args[0].value, scope, imports, depth + 1)
        if qualified in ("torch.accelerator.current_accelerator",):
            return "accelerator"
        if qualified in _XLA_DEVICE_CALLS:
            return "xla"
    if isinstance(node, cst.Attribute):
        # torch.accelerator.current_accelerator().type and the like
        inner = node.value
        if isinstance(inner, cst.Call) and canonical(imports.qualify(inner.func)) == "torch.accelerator.current_accelerator":
            return "accelerator"
    return None


def _device_string(value: str) -> str | None:
    head = value.split(":", 1)[0].strip().lower()
    if head in ("cuda", "cpu", "xla"):
        return head
    if head in ("mps", "xpu", "npu", "hpu"):
        return "other"
    return None


def _settle_devices(info: ModuleInfo) -> None:
    for expr, scope in info.devices:
        kind = device_kind(expr, scope, info.imports)
        if kind in ("cuda", "accelerator"):
            info.cuda = True
        elif kind == "cpu":
            info.cpu_device = True
        elif kind == "xla":
            info.xla = True
    for lam in info.lambdas.values():
        if not lam.cuda:
            lam.cuda = any(device_kind(expr, scope, info.imports) == "cuda" for expr, scope in lam.cuda_devices)
    for fn in info.functions:
        if not fn.cuda:
            fn.cuda = any(
                device_kind(expr, scope, info.imports) == "cuda" for expr, scope in fn.cuda_devices
            )
