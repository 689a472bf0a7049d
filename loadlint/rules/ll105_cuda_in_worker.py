from __future__ import annotations

from typing import Iterator

import libcst as cst

from loadlint.facts.loaders import LoaderCall
from loadlint.facts.names import FunctionFacts, LambdaFacts
from loadlint.rules.base import Context, Report, Rule, Scope
from loadlint.rules.shared import dataset_touches_cuda, workers_on


def _callable_facts(ctx: Context, expr: cst.BaseExpression | None, scope: Scope | None) -> FunctionFacts | LambdaFacts | None:
    if expr is None:
        return None
    target, _ = ctx.follow(expr, scope)
    if type(target) is cst.Lambda:
        return ctx.names.lambdas.get(id(target))
    if type(expr) is cst.Name and scope is not None:
        definition = ctx.names.definition(expr.value, scope)
        if isinstance(definition, FunctionFacts):
            return definition
    return None


def cuda_in_worker(ctx: Context, call: LoaderCall) -> str | None:
    """LL105's condition without the worker gate: what touches CUDA in a worker."""
    method = dataset_touches_cuda(ctx, call)
    if method is not None:
        return f"`{method}`"
    for param in ("collate_fn", "worker_init_fn"):
        facts = _callable_facts(ctx, call.expr(param), call.scope)
        if facts is not None and facts in ctx.accelerator.cuda_code:
            return f"`{param}`"
    return None


class CudaInWorker(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls with workers whose Dataset (`__init__`,
    `__getitem__`, `__getitems__`, `__iter__` of a class in the module), or
    whose `collate_fn` or `worker_init_fn`, touches CUDA: `.cuda()`,
    `.to("cuda")` or `.to(<CUDA device>)`, `device="cuda"`, `torch.cuda.*`
    (queries such as `torch.cuda.is_available()` excepted).

    ## Why is this bad?
    Worker processes forked from a process that has initialised CUDA cannot
    use it; the first batch fails with:

    ```
    RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method
    ```

    With spawn, every worker creates its own CUDA context (hundreds of MB of
    GPU memory each) and the copies no longer overlap with compute.  Users
    who hit the error often fall back to `num_workers=0`, which starves the
    GPU.  Load on the CPU in workers; move batches in the training loop,
    with `pin_memory=True` and `non_blocking=True`.

    ## Example
    ```python
    class Images(Dataset):
        def __getitem__(self, i):
            return decode(self.files[i]).cuda()

    loader = DataLoader(Images(files), batch_size=32, num_workers=4)
    ```

    Use instead:
    ```python
    class Images(Dataset):
        def __getitem__(self, i):
            return decode(self.files[i])

    loader = DataLoader(Images(files), batch_size=32, num_workers=4, pin_memory=True)
    for batch in loader:
        batch = batch.cuda(non_blocking=True)
    ```

    ## Fix safety
    No fix is offered: moving the transfer out of the Dataset changes where
    the rest of the code expects its tensors.

    ## References
    - [PyTorch: Multi-process data loading (CUDA in workers)](https://pytorch.org/docs/stable/data.html#multi-process-data-loading)
    - [CUDA in multiprocessing](https://pytorch.org/docs/stable/notes/multiprocessing.html#cuda-in-multiprocessing)
    """

    code = "LL105"
    name = "cuda-in-worker"
    category = "data-bug"
    summary = "the Dataset or `collate_fn` uses CUDA inside worker processes"
    hazard_order = 3

    def worker_hazards(self, ctx: Context, call: LoaderCall) -> list[str]:
        where = cuda_in_worker(ctx, call)
        return [f"{where} uses CUDA (workers cannot initialise CUDA after fork)"] if where else []

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.calls:
            if not workers_on(call):
                continue
            where = cuda_in_worker(ctx, call)
            if where is None:
                continue
            message = (
                f"{where} uses CUDA inside worker processes: forked workers fail with \"Cannot re-initialize CUDA in "
                "forked subprocess\" and spawned ones each create a CUDA context; load on the CPU and move batches "
                "to the GPU in the training loop"
            )
            yield Report(call.node, message)
