from __future__ import annotations

from typing import Iterator

from loadlint.facts.datasets import DATAPIPE_BASES
from loadlint.facts.loaders import LoaderCall
from loadlint.facts.values import MISSING
from loadlint.rules.base import Context, Report, Rule
from loadlint.rules.shared import workers_on


def unsharded_iterable(ctx: Context, call: LoaderCall) -> str | None:
    """LL104's condition without the worker gate: the name of a local
    IterableDataset whose ``__iter__`` never asks which worker it runs in."""
    if call.value("worker_init_fn") is not MISSING:
        return None
    _, cls = ctx.dataset_class(call)
    if cls is None or ctx.is_iterable_dataset(call) is not True:
        return None
    names = ctx.names
    if any(b in DATAPIPE_BASES for b in names.class_bases(cls)):
        return None
    if names.method_of(cls, "__iter__") is None:
        return None
    callers = ctx.datasets.worker_info_callers
    if any(m in callers for klass in names.class_hierarchy(cls) for m in klass.methods.values()):
        return None
    return cls.name


class UnshardedIterableDataset(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls with workers and no `worker_init_fn` over
    an `IterableDataset` subclass (defined in the module) whose `__iter__`
    never consults `get_worker_info()` (no method of the class does).

    ## Why is this bad?
    Every worker gets its own copy of an iterable dataset and iterates it
    from the start.  Unless `__iter__` splits the stream by
    `get_worker_info().id`, each of N workers yields the whole stream, so
    every sample arrives N times per epoch.  Nothing fails; the epoch is N
    times longer and the data distribution is skewed.  PyTorch's
    documentation: "naive multi-process loading will often result in
    duplicated data".

    The rule is silent when a `worker_init_fn` is passed (the documented
    alternative place to shard), for `IterDataPipe`s, and when `__iter__` is
    inherited from a class outside the module.

    ## Example
    ```python
    class Lines(IterableDataset):
        def __iter__(self):
            with open(self.path) as f:
                yield from f

    loader = DataLoader(Lines(path), batch_size=32, num_workers=4)
    ```

    Use instead:
    ```python
    class Lines(IterableDataset):
        def __iter__(self):
            info = get_worker_info()
            workers, worker = (info.num_workers, info.id) if info else (1, 0)
            with open(self.path) as f:
                yield from itertools.islice(f, worker, None, workers)
    ```

    ## Fix safety
    No fix is offered: how to split a stream depends on its source.

    ## References
    - [PyTorch: Iterable-style datasets](https://pytorch.org/docs/stable/data.html#torch.utils.data.IterableDataset)
    """

    code = "LL104"
    name = "unsharded-iterable-dataset"
    category = "data-bug"
    summary = "an `IterableDataset` that does not shard by worker: every sample arrives `num_workers` times"
    hazard_order = 4

    def worker_hazards(self, ctx: Context, call: LoaderCall) -> list[str]:
        name = unsharded_iterable(ctx, call)
        if name is None:
            return []
        return [f"the IterableDataset `{name}` does not shard by worker (every worker would yield every sample)"]

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.calls:
            if not workers_on(call):
                continue
            name = unsharded_iterable(ctx, call)
            if name is None:
                continue
            n = call.workers()
            message = (
                f"`{name}.__iter__` never calls `get_worker_info()`: each of the {n} workers yields the whole stream, "
                f"so every sample arrives {n} times; split the stream by `get_worker_info().id`"
            )
            yield Report(call.node, message)
