from __future__ import annotations

from typing import Iterator

from loadlint.rules.base import Context, Invalid, Report, Rule, Valid
from loadlint.rules.shared import workers_on


class IteratorRecreated(Rule):
    """
    ## What it does
    Checks for `next(iter(loader))` inside a loop on a `DataLoader` with
    workers.  The finding is reported at the `next(iter(...))` call.

    ## Why is this bad?
    `iter(loader)` creates a new iterator each time: it starts all the
    worker processes (or, with persistent workers, resets them) and primes
    `num_workers × prefetch_factor` batches, only for `next` to take one and
    throw the rest away.  In a loop that is the full start-up cost of the
    loader per step.  The pattern usually peeks at a batch (to read its
    size) or draws "one more batch" per step.

    ## Example
    ```python
    for step in range(steps):
        x, y = next(iter(loader))
    ```

    Use instead:
    ```python
    batches = iter(loader)
    for step in range(steps):
        try:
            x, y = next(batches)
        except StopIteration:
            batches = iter(loader)
            x, y = next(batches)
    ```

    ## Fix safety
    No fix is offered: what should happen when the iterator is exhausted
    depends on the loop.

    ## References
    - [`torch.utils.data.DataLoader`](https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader)
    """

    code = "LL207"
    name = "iterator-recreated"
    category = "performance"
    across_files = True
    summary = "`next(iter(loader))` in a loop restarts the workers each time"

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.calls:
            if not workers_on(call):
                continue
            keys = ctx.keys_of(call)
            for step in ctx.iteration.next_iter:
                if not step.in_loop or step.key not in keys:
                    continue
                message = (
                    f"`next(iter({step.key[1]}))` inside a loop creates a new iterator on every pass, restarting and "
                    f"priming all {call.workers()} workers for one batch; create the iterator once before the loop"
                )
                yield Report(step.node, message)

    VALID = [
        # One batch of each loader of the dict: the loop does not repeat one.
        Valid("""
            from torch.utils.data import DataLoader
            loaders = {"train": DataLoader(a, num_workers=2), "val": DataLoader(b, num_workers=2)}
            for loader in loaders.values():
                sample = next(iter(loader))
        """),
        Valid("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=2)
            batches = iter(loader)
            for step in range(10):
                x = next(batches)
        """),
        # Once, outside a loop.
        Valid("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=2)
            sample = next(iter(loader))
        """),
        Valid("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=0)
            for step in range(10):
                x = next(iter(loader))
        """),
    ]
    INVALID = [
        Invalid(
            """
            from torch.utils.data import DataLoader
            loaders = (DataLoader(a, num_workers=2), DataLoader(b, num_workers=0))
            for step in range(10):
                x = next(iter(loaders[0]))
            """,
            message="`next(iter(loaders[0]))` inside a loop creates a new iterator on every pass, restarting and "
            "priming all 2 workers for one batch; create the iterator once before the loop",
            line=4,
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=4, num_workers=2)
            for step in range(10):
                x = next(iter(loader))
            """,
            message="`next(iter(loader))` inside a loop creates a new iterator on every pass, restarting and priming "
            "all 2 workers for one batch; create the iterator once before the loop",
            line=4,
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader
            class Trainer:
                def __init__(self, ds):
                    self.train_data = DataLoader(ds, batch_size=32, num_workers=4)
                def train(self, epochs):
                    for epoch in range(epochs):
                        b_sz = len(next(iter(self.train_data))[0])
            """,
        ),
    ]
