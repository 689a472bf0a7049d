from __future__ import annotations

from typing import Iterator

from loadlint.rules.base import Context, Report, Rule
from loadlint.rules.project_context import ProjectContext, ProjectReport
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
    summary = "`next(iter(loader))` in a loop restarts the workers each time"
    #: Across files, a fix adding workers would introduce it: asked first.
    project_hazard = 1

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

    def check_project(self, project: ProjectContext) -> Iterator[ProjectReport]:
        """``next(iter(...))`` in a loop, of a loader with workers built in
        another function."""
        for flow in project.loaders:
            if flow.workers is None:
                continue
            for use in flow.uses:
                if use.here or not use.repeated or use.kind != "next_iter":
                    continue  # the file's own check sees what happens where it is built
                calls = use.calls
                message = (
                    f"`next(iter(...))` inside a loop creates a new iterator on every pass, restarting and priming "
                    f"{flow.workers} workers for one batch; create the iterator once before the loop (the loader is "
                    f"built at {flow.place}" + (f"; `{use.function}` {calls})" if calls else ")")
                )
                yield ProjectReport(use.path, use.at, message)
