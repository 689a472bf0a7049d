from __future__ import annotations

from typing import Iterator

from loadlint.facts.loaders import LoaderCall
from loadlint.facts.values import MISSING
from loadlint.rules.base import Context, Report, Rule
from loadlint.rules.shared import workers_on

_DRAW_METHODS = ("__getitem__", "__getitems__", "__iter__")


def shared_rng(ctx: Context, call: LoaderCall) -> tuple[str, str] | None:
    """LL103's condition without the worker gate: (method, generator) when the
    Dataset draws from one generator instance created before the workers."""
    if call.value("worker_init_fn") is not MISSING:
        return None
    _, cls = ctx.dataset_class(call)
    if cls is None:
        return None
    names, datasets = ctx.names, ctx.datasets
    attrs: set[str] = set()
    for klass in names.class_hierarchy(cls):
        init = klass.methods.get("__init__")
        if init is not None:
            attrs |= datasets.rng_attrs.get(init, set())
    for name in _DRAW_METHODS:
        method = names.method_of(cls, name)
        if method is None or method in datasets.worker_info_callers:
            continue
        used = sorted(datasets.self_attrs.get(method, set()) & attrs)
        if used:
            return f"{cls.name}.{name}", f"self.{used[0]}"
        used = sorted(method.names_used & datasets.module_rngs)
        if used:
            return f"{cls.name}.{name}", used[0]
    return None


class WorkerRngDuplication(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls with workers and no `worker_init_fn` whose
    Dataset (a class in the same module) creates a random generator instance
    in `__init__` or at module level (`np.random.default_rng`,
    `np.random.RandomState`, `random.Random`, `torch.Generator`) and draws
    from it in `__getitem__` (or `__iter__`).

    ## Why is this bad?
    Each worker receives a copy of the Dataset, generator state included.
    PyTorch reseeds `torch`, `random` and the legacy global `np.random` in
    every worker, but not generator instances: all workers draw the same
    numbers, so "random" crops, flips and noise repeat in lock-step across
    workers (and, without persistent workers, across epochs too).  Nothing
    fails; the augmentation is just much less random than intended.  This
    is the bug found in most projects that use NumPy for augmentation.

    The rule is silent when a `worker_init_fn` is passed (it may reseed) and
    when the drawing method calls `get_worker_info()`.

    ## Example
    ```python
    class Noisy(Dataset):
        def __init__(self, data):
            self.data = data
            self.rng = np.random.default_rng(0)

        def __getitem__(self, i):
            return self.data[i] + self.rng.normal()
    ```

    Use instead:
    ```python
    def seed_worker(worker_id):
        info = torch.utils.data.get_worker_info()
        info.dataset.rng = np.random.default_rng(info.seed)


    loader = DataLoader(Noisy(data), batch_size=32, num_workers=4, worker_init_fn=seed_worker)
    ```

    ## Fix safety
    No fix is offered: the dataset may be wrapped (`Subset`,
    `ConcatDataset`), so where to reseed is the author's decision.

    ## References
    - [PyTorch: Randomness in multi-process data loading](https://pytorch.org/docs/stable/data.html#randomness-in-multi-process-data-loading)
    - [Reproducibility: DataLoader](https://pytorch.org/docs/stable/notes/randomness.html#dataloader)
    """

    code = "LL103"
    name = "worker-rng-duplication"
    category = "data-bug"
    summary = "a Dataset's random generator is copied into every worker: identical augmentations"
    hazard_order = 5

    def worker_hazards(self, ctx: Context, call: LoaderCall) -> list[str]:
        rng = shared_rng(ctx, call)
        return [f"`{rng[0]}` draws from `{rng[1]}` (every worker would repeat the same random numbers)"] if rng else []

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.calls:
            if not workers_on(call):
                continue
            found = shared_rng(ctx, call)
            if found is None:
                continue
            method, generator = found
            message = (
                f"`{method}` draws from `{generator}`, created before the workers start: every worker copies the same "
                "generator state and produces the same random numbers; reseed it per worker in a `worker_init_fn`"
            )
            yield Report(call.node, message)
