"""Dataset classes: what a loader's dataset is (a local class, an iterable
dataset, a TensorDataset), and what its methods do that matters to workers
(random generators created before the workers, ``get_worker_info()``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from loadlint.facts.cursor import Provider
from loadlint.facts.loaders import LoaderCall
from loadlint.facts.names import ClassFacts, FunctionFacts, NameFacts
from loadlint.resolve import canonical, dotted_name, follow_name

ITERABLE_BASES = {
    "torch.utils.data.IterableDataset",
    "torch.utils.data.IterDataPipe",
    "torch.utils.data.datapipes.datapipe.IterDataPipe",
    "datasets.IterableDataset",
    "webdataset.WebDataset",
}
#: DataPipes shard themselves (``sharding_filter``).
DATAPIPE_BASES = ("torch.utils.data.IterDataPipe", "torch.utils.data.datapipes.datapipe.IterDataPipe")
_MAP_BASES = {"torch.utils.data.Dataset", "torch.utils.data.TensorDataset"}
_RNG_CALLS = {
    "numpy.random.default_rng",
    "numpy.random.RandomState",
    "numpy.random.Generator",
    "random.Random",
    "torch.Generator",
}
#: The methods a worker process runs.
WORKER_METHODS = ("__init__", "__getitem__", "__getitems__", "__iter__")


@dataclass
class DatasetFacts:
    """What Dataset methods do that matters once workers copy them."""

    #: Module-level names bound to a random generator instance.
    module_rngs: set[str] = field(default_factory=set)
    #: ``self.<attr>`` generators each ``__init__`` creates.
    rng_attrs: dict[FunctionFacts, set[str]] = field(default_factory=dict)
    #: ``self.<attr>`` names each method reads.
    self_attrs: dict[FunctionFacts, set[str]] = field(default_factory=dict)
    #: Functions that call ``get_worker_info()`` (or shard by node).
    worker_info_callers: set[FunctionFacts] = field(default_factory=set)


class DatasetProvider(Provider[DatasetFacts]):
    """Records generators, ``self`` reads and worker-info calls."""

    def visit_Assign(self, node: cst.Assign) -> None:
        if not isinstance(node.value, cst.Call):
            return
        cursor = self.cursor
        fn = cursor.function
        if fn is not None and fn.name != "__init__":
            return
        if cursor.qualify(node.value.func) not in _RNG_CALLS:
            return
        for target in node.targets:
            if fn is None and isinstance(target.target, cst.Name):
                # ``rng = np.random.default_rng()`` at module level
                self.facts.module_rngs.add(target.target.value)
            elif fn is not None:
                dotted = dotted_name(target.target)
                if dotted and dotted.startswith("self."):
                    self.facts.rng_attrs.setdefault(fn, set()).add(dotted[5:])

    def visit_Attribute(self, node: cst.Attribute) -> None:
        fn = self.cursor.function
        if fn is not None and fn.class_name is not None and isinstance(node.value, cst.Name) and node.value.value == "self":
            self.facts.self_attrs.setdefault(fn, set()).add(node.attr.value)

    def visit_Call(self, node: cst.Call) -> None:
        fn = self.cursor.function
        if fn is None:
            return
        qualified = self.cursor.qualified
        func = node.func
        if (qualified is not None and qualified.endswith("get_worker_info")) or (
            isinstance(func, cst.Name) and func.value in ("get_worker_info", "split_dataset_by_node")
        ):
            self.facts.worker_info_callers.add(fn)


def dataset_class(names: NameFacts, call: LoaderCall) -> tuple[str | None, ClassFacts | None]:
    """(qualified name, local class facts) of the dataset argument's constructor."""
    expr = call.expr("dataset")
    if expr is None:
        return None, None
    expr, _ = follow_name(expr, call.scope)
    if not isinstance(expr, cst.Call):
        return None, None
    local = expr.func.value if isinstance(expr.func, cst.Name) else None
    if local is not None and local in names.classes:
        return local, names.classes[local]
    return canonical(names.imports.qualify(expr.func)), None


def is_tensor_dataset(names: NameFacts, call: LoaderCall) -> bool:
    """The dataset is a ``TensorDataset`` (in memory)."""
    return dataset_class(names, call)[0] == "torch.utils.data.TensorDataset"


def is_iterable_dataset(names: NameFacts, call: LoaderCall) -> bool | None:
    """True/False when the dataset's kind is known, None when it is not."""
    qualified, cls = dataset_class(names, call)
    if cls is not None:
        bases = names.class_bases(cls)
        if bases & ITERABLE_BASES:
            return True
        if bases & _MAP_BASES or "__getitem__" in cls.methods:
            return False
        return None
    if qualified in ITERABLE_BASES:
        return True
    if qualified in _MAP_BASES:
        return False
    return None
