"""Distributed evidence: process groups, rank environment variables,
distributed samplers, and the training frameworks that shard loaders
themselves."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import libcst as cst

from loadlint.cst.codegen import code_for_node
from loadlint.facts.cursor import Cursor, Provider
from loadlint.facts.loaders import LoaderCall
from loadlint.facts.names import Key, NameFacts
from loadlint.cst.walk import find_all
from loadlint.facts.resolve import Scope, canonical, dotted_name, evaluate, follow_name, string_value

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
#: Modules whose import shows a module trains with JAX.
_JAX_MODULES = frozenset({"jax", "flax", "optax"})
LIGHTNING_TRAINERS = {"lightning.Trainer", "lightning.pytorch.Trainer", "pytorch_lightning.Trainer"}
#: Lightning strategies that start one process per device.
_MULTIPROCESS_STRATEGIES = ("ddp", "fsdp", "deepspeed")
_LIGHTNING_BASES = ("LightningModule", "LightningDataModule")
_LIGHTNING_HOOKS = {"train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader"}
_EPOCH_HOOKS = {"train_dataloader", "val_dataloader"}


@dataclass(eq=False)
class SamplerCall:
    """A ``DistributedSampler(...)`` and the variable it is assigned to."""

    node: cst.Call
    scope: Scope
    key: Key | None


@dataclass
class DistributedFacts:
    """What shows a module trains distributed, and who builds its samplers."""

    #: What shows the script runs distributed, in source order (first is quoted).
    evidence: list[str] = field(default_factory=list)
    #: Frameworks that build distributed loaders themselves.
    frameworks: set[str] = field(default_factory=set)
    samplers: list[SamplerCall] = field(default_factory=list)
    #: Processes per node the module starts itself (Lightning's ``devices=N``); None when the target decides.
    ranks_per_node: int | None = None
    #: How many entries of ``evidence`` are rank variables read from the environment.
    env_evidence: int = 0


class DistributedProvider(Provider[DistributedFacts]):
    """Records distributed setup, samplers and frameworks."""

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if any(base.endswith(_LIGHTNING_BASES) for base in self.cursor.classes[-1].bases):
            self.facts.frameworks.add("Lightning")

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.cursor.qualified
        facts = self.facts
        if qualified in _DISTRIBUTED_CALLS:
            facts.evidence.append(qualified)
        elif qualified in _FRAMEWORK_CALLS:
            facts.frameworks.add(_FRAMEWORK_CALLS[qualified])
            if qualified in LIGHTNING_TRAINERS and not in_test(self.cursor):
                self._lightning_trainer(node)
        elif qualified == "torch.cuda.set_device" and node.args and "rank" in code_for_node(node.args[0].value):
            # One GPU per process, chosen by its rank.
            facts.evidence.append(f"torch.cuda.set_device({code_for_node(node.args[0].value)})")
        elif qualified in ("os.environ.get", "os.getenv"):
            if node.args and type(node.args[0].value) is cst.SimpleString:
                if string_value(node.args[0].value) in _DIST_ENV:
                    facts.evidence.append(f"{qualified}({node.args[0].value.value})")
                    facts.env_evidence += 1
        elif qualified == "torch.utils.data.DistributedSampler":
            facts.samplers.append(SamplerCall(node, self.cursor.scope, self.cursor.target_key(node)))

    def _lightning_trainer(self, node: cst.Call) -> None:
        """``Trainer(devices=N, strategy="ddp")`` starts N processes per node."""
        scope = self.cursor.scope
        devices = strategy = None
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "devices":
                devices = evaluate(arg.value, scope)
            elif arg.keyword is not None and arg.keyword.value == "strategy":
                strategy = evaluate(arg.value, scope)
        count = devices if isinstance(devices, int) and not isinstance(devices, bool) and devices > 1 else None
        if count is not None:
            self.facts.evidence.append(f"lightning.Trainer(devices={count})")
            self.facts.ranks_per_node = max(self.facts.ranks_per_node or 0, count)
        elif isinstance(strategy, str) and strategy.startswith(_MULTIPROCESS_STRATEGIES):
            self.facts.evidence.append(f"lightning.Trainer(strategy={strategy!r})")

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if len(node.slice) == 1 and self.cursor.qualify(node.value) == "os.environ":
            index = node.slice[0].slice
            if type(index) is cst.Index and type(index.value) is cst.SimpleString:
                if string_value(index.value) in _DIST_ENV:
                    self.facts.evidence.append(f"os.environ[{index.value.value}]")
                    self.facts.env_evidence += 1

    def finish(self, module: cst.Module, text: str | None) -> None:
        """A rank read from the environment alone is no torch.distributed
        training in a module that trains with JAX (Flax scripts read
        ``LOCAL_RANK`` as boilerplate, and JAX runs one process per host),
        nor in a test module (it imports ``pytest``)."""
        facts = self.facts
        if facts.env_evidence and facts.env_evidence == len(facts.evidence):
            roots = {name.split(".", 1)[0] for name in self.cursor.imports.names.values()}
            # A test module reads ``RANK`` to keep each rank's files apart
            # (composer's fixtures name an asset folder with it); its loaders
            # are test inputs, not a training run.
            if roots & _JAX_MODULES or "pytest" in roots:
                facts.evidence.clear()


#: The Trainer methods that iterate the loaders of what they are given.
LIGHTNING_RUNS = ("fit", "validate", "test", "predict")


def is_lightning_class(bases: list[str]) -> bool:
    """A ``LightningModule`` or ``LightningDataModule`` (by a base's name)."""
    return any(base.endswith(_LIGHTNING_BASES) for base in bases)


def lightning_accelerator(node: cst.Call, scope: Scope) -> str | None:
    """``"gpu"`` or ``"cuda"`` when a Lightning ``Trainer(...)``'s
    ``accelerator`` certainly resolves to the GPU, else None."""
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == "accelerator":
            value = evaluate(arg.value, scope)
            return value if value in ("gpu", "cuda") else None
    return None


def lightning_hook(names: NameFacts, call: LoaderCall, every_epoch: bool = False) -> bool:
    """The loader is returned by a ``*_dataloader`` hook of a Lightning
    module; with ``every_epoch``, by one that ``fit`` runs every epoch (the
    train and validation hooks: ``test`` and ``predict`` run theirs once)."""
    hooks = _EPOCH_HOOKS if every_epoch else _LIGHTNING_HOOKS
    if call.returned_from not in hooks or call.class_name is None:
        return False
    cls = names.classes.get(call.class_name)
    return cls is not None and any(b.endswith(_LIGHTNING_BASES) for b in cls.bases)


def conditional_start(names: NameFacts, facts: DistributedFacts, call: LoaderCall) -> cst.BaseExpression | None:
    """The condition of the ``if`` under which the loader's function starts
    distributed training, when every call there that shows it is inside one
    (``if args.distributed: model = DDP(model)``): a run may have no process
    group, and a ``DistributedSampler`` fails without one."""
    found = [f for f in names.functions if f.name == call.function and f.class_name == call.class_name]
    if call.function is None or len(found) != 1:
        return None
    evidence = set(facts.evidence)
    shown = [
        node for node in find_all(found[0].node, cst.Call)
        if canonical(names.imports.qualify(node.func)) in evidence
    ]
    guards: dict[int, cst.If] = {}
    for branch in find_all(found[0].node, cst.If):
        for inner in find_all(branch.body, cst.Call):
            guards.setdefault(id(inner), branch)
    if not shown or not all(id(node) in guards for node in shown):
        return None
    return guards[id(shown[0])].test


def in_test(cursor: Cursor) -> bool:
    """The traversal is inside a test function: a ``Trainer`` built there
    says nothing about the module's other loaders."""
    return any(fn.name.startswith("test") for fn in cursor.functions)


#: Calls and attributes that are true in the process of rank 0 alone.
_MAIN_PROCESS = frozenset({"is_main_process", "is_master", "is_rank_zero", "is_global_zero", "is_local_main_process"})


def _is_rank(node: cst.BaseExpression) -> bool:
    """``rank``, ``args.local_rank``, ``dist.get_rank()``, ``int(os.environ["RANK"])``."""
    if type(node) is cst.Call:
        name = dotted_name(node.func) or ""
        if name == "int" and len(node.args) == 1:
            return _is_rank(node.args[0].value)
        return name.rsplit(".", 1)[-1] in ("get_rank", "get_local_rank", "get_global_rank")
    if type(node) is cst.Subscript and len(node.slice) == 1:
        index = node.slice[0].slice
        key = index.value if type(index) is cst.Index else None
        return type(key) is cst.SimpleString and string_value(key) in ("RANK", "LOCAL_RANK")
    last = (dotted_name(node) or "").rsplit(".", 1)[-1].lower()
    # ``node_rank == 0`` is every process of a node, not one.
    return last.endswith("rank") and "node" not in last and "group" not in last


def rank_zero_test(test: cst.BaseExpression) -> bool:
    """Whether an ``if`` test holds in the rank-0 process alone (``rank == 0``,
    ``args.rank % ngpus_per_node == 0``, ``not dist.get_rank()``,
    ``is_main_process()``), or in it and in runs that are not distributed
    (``not args.distributed or rank == 0``)."""
    if type(test) is cst.Comparison and len(test.comparisons) == 1 and type(test.comparisons[0].operator) is cst.Equal:
        left, right = test.left, test.comparisons[0].comparator
        for side, other in ((left, right), (right, left)):
            if type(other) is cst.Integer and other.value == "0":
                if type(side) is cst.BinaryOperation and type(side.operator) is cst.Modulo:
                    side = side.left  # the first rank of each node: a rank 0 all the same
                return _is_rank(side)
        return False
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return _is_rank(test.expression)
    if type(test) is cst.Call or type(test) is cst.Attribute:
        name = dotted_name(test.func if type(test) is cst.Call else test) or ""
        return name.rsplit(".", 1)[-1] in _MAIN_PROCESS
    if type(test) is cst.BooleanOperation:
        sides = (test.left, test.right)
        if type(test.operator) is cst.And:
            return any(rank_zero_test(side) for side in sides)
        # ``not distributed or rank == 0``: the other side is a run without ranks.
        return any(rank_zero_test(side) for side in sides) and all(
            rank_zero_test(side) or type(side) is cst.UnaryOperation and type(side.operator) is cst.Not
            for side in sides
        )
    return False


def rank_zero_only(names: NameFacts, statements: Sequence[cst.BaseStatement], call: LoaderCall) -> cst.BaseExpression | None:
    """The test of an ``if`` under which every use of the loader's variable
    in the body that builds it sits (``if args.rank == 0: validate(loader)``):
    one process reads it, so no rank repeats another's work.  None when a
    use is outside such a block, or the loader has no plain variable."""
    if call.key is None or not call.key[1].isidentifier():
        return None
    variable = call.key[1]
    if call.scope.kind == "function":
        found = [f for f in names.functions if f.scope is call.scope]
        if len(found) != 1:
            return None
        roots: list[cst.CSTNode] = [found[0].node.body]
    else:
        roots = list(statements)
    not_uses: set[int] = {id(n) for n in find_all(call.node, cst.Name)}
    guarded: dict[int, cst.BaseExpression] = {}
    uses: list[cst.Name] = []
    for root in roots:
        for node in find_all(root, cst.Attribute):
            not_uses.add(id(node.attr))
        for arg in find_all(root, cst.Arg):
            if arg.keyword is not None:
                not_uses.add(id(arg.keyword))
        for param in find_all(root, cst.Param):
            not_uses.add(id(param.name))
        for target in find_all(root, cst.AssignTarget):
            if type(target.target) is cst.Name:
                not_uses.add(id(target.target))
        for branch in find_all(root, cst.If):
            if rank_zero_test(branch.test):
                for name in find_all(branch.body, cst.Name):
                    guarded.setdefault(id(name), branch.test)
        uses += [n for n in find_all(root, cst.Name) if n.value == variable and id(n) not in not_uses]
    if not uses or not all(id(n) in guarded for n in uses):
        return None
    return guarded[id(uses[0])]


def sampler_tail(names: NameFacts, call: LoaderCall) -> bool:
    """Whether the loader reads the samples a ``DistributedSampler`` drops:
    ``Subset(ds, range(len(sampler) * world_size, len(ds)))``, the tail an
    evaluation with ``drop_last=True`` then scores apart (pytorch/examples'
    ImageNet ``aux_val_loader``); every rank reading that tail is the point."""
    expr = call.expr("dataset")
    if expr is None:
        return False
    target, scope = follow_name(expr, call.scope)
    if type(target) is not cst.Call or not (dotted_name(target.func) or "").endswith("Subset"):
        return False
    indices = next((a.value for a in target.args if a.keyword is not None and a.keyword.value == "indices"), None)
    if indices is None and len(target.args) >= 2 and target.args[1].keyword is None:
        indices = target.args[1].value
    if indices is None:
        return False
    indices, _ = follow_name(indices, scope)
    if type(indices) is not cst.Call or dotted_name(indices.func) != "range" or len(indices.args) < 2:
        return False
    start = indices.args[0].value
    if type(start) is not cst.BinaryOperation or type(start.operator) is not cst.Multiply:
        return False
    return any(
        type(side) is cst.Call and dotted_name(side.func) == "len" and len(side.args) == 1
        and "sampler" in code_for_node(side.args[0].value).lower()
        for side in (start.left, start.right)
    )


#: Names of a flag that is true when the run has several processes.
_MANY_PROCESSES = ("distributed", "multi_gpu", "multigpu", "ddp", "world_size")
#: Methods that cut a tensor of indices into parts, one a rank.
_PARTS = frozenset({"split", "chunk", "tensor_split", "array_split"})


def single_process(names: NameFacts, statements: Sequence[cst.BaseStatement], call: LoaderCall) -> str | None:
    """Why no other rank reads this loader's samples, or None: an ``assert``
    that runs before it says the run has one process (``assert not
    multi_gpu``, ``assert world_size == 1``: wav2vec2's transcription
    branch), or the dataset is a rank's own part of an index tensor
    (``idx = idx.split(n)[rank]``, ``idx[rank::world_size]``: PyG's
    multi-GPU Quiver example)."""
    body: Sequence[cst.BaseStatement] = ()
    if call.scope.kind == "function":
        found = [f for f in names.functions if f.scope is call.scope]
        if len(found) == 1 and type(found[0].node.body) is cst.IndentedBlock:
            body = found[0].node.body.body
    else:
        body = statements
    for test in _asserts_before(body, call.node):
        if _one_process(test):
            return f"assert {code_for_node(test)}"
    expr = call.expr("dataset")
    if type(expr) is cst.Name:
        found_name = call.scope_of("dataset").lookup(expr.value)
        if found_name is not None and found_name[1]:
            last = max(found_name[1], key=lambda b: b.order).value
            if last is not None and _rank_part(last):
                return code_for_node(last)
    elif expr is not None and _rank_part(expr):
        return code_for_node(expr)
    return None


def _asserts_before(body: Sequence[cst.BaseStatement], target: cst.CSTNode) -> list[cst.BaseExpression]:
    """The tests of the ``assert`` statements that run before ``target``:
    earlier in its block and in each block around it."""
    for index, statement in enumerate(body):
        if not any(node is target for node in find_all(statement, type(target))):
            continue
        tests = [
            small.test for earlier in body[:index] if type(earlier) is cst.SimpleStatementLine
            for small in earlier.body if type(small) is cst.Assert
        ]
        for block in _blocks(statement):
            inner = _asserts_before(block.body, target)
            if inner or any(node is target for node in find_all(block, type(target))):
                return tests + inner
        return tests
    return []


def _blocks(node: cst.CSTNode) -> list[cst.IndentedBlock]:
    """The indented blocks of a compound statement (its ``else``, ``elif``
    and handlers included), not those of the statements inside them."""
    out: list[cst.IndentedBlock] = []
    for child in node.children:
        if type(child) is cst.IndentedBlock:
            out.append(child)
        elif not isinstance(child, cst.BaseExpression):
            out += _blocks(child)
    return out


def _one_process(test: cst.BaseExpression) -> bool:
    """``not multi_gpu``, ``not args.distributed``, ``world_size == 1``."""
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        last = (dotted_name(test.expression) or "").rsplit(".", 1)[-1].lower()
        if last.startswith(("no_", "disable", "single")):
            return False
        return any(flag in last for flag in _MANY_PROCESSES if flag != "world_size")
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        comparison = test.comparisons[0]
        last = (dotted_name(test.left) or "").rsplit(".", 1)[-1].lower()
        one = type(comparison.comparator) is cst.Integer and comparison.comparator.value == "1"
        return last.endswith("world_size") and one and isinstance(comparison.operator, (cst.Equal, cst.LessThanEqual))
    return False


def _rank_part(value: cst.BaseExpression) -> bool:
    """``idx.split(n)[rank]`` or ``idx[rank::world_size]``."""
    if type(value) is not cst.Subscript or len(value.slice) != 1:
        return False
    index = value.slice[0].slice
    if type(index) is cst.Index:
        inner = value.value
        return (type(inner) is cst.Call and type(inner.func) is cst.Attribute
                and inner.func.attr.value in _PARTS and _is_rank(index.value))
    return type(index) is cst.Slice and index.lower is not None and _is_rank(index.lower) and index.step is not None
