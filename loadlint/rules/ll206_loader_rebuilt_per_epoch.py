from __future__ import annotations

from typing import Iterator

from loadlint.facts.loaders import LoaderCall
from loadlint.rules.base import Context, Report, Rule
from loadlint.rules.shared import workers_on


def _depends_on_loop(call: LoaderCall, names: set[str]) -> bool:
    for frame in call.loops:
        if frame.targets & names:
            return True
        loop_id = id(frame.node)
        for name in names:
            found = call.scope.lookup(name)
            if found is not None and any(loop_id in b.path for b in found[1]):
                return True
    return False


class LoaderRebuiltPerEpoch(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls with workers constructed inside a loop
    whose arguments do not depend on the loop: no argument reads the loop
    variable or a name assigned inside the loop.

    ## Why is this bad?
    Constructing the loader in the loop starts a new set of worker processes
    on every pass and throws them away at the end of it; not even
    `persistent_workers=True` helps, because each pass has a new loader.
    When the arguments are the same every time, building it once before the
    loop (with `persistent_workers=True`) gives the same batches without the
    start-up cost.

    Loaders rebuilt on purpose (curriculum learning, a dataset or batch size
    that changes per epoch) read the loop variable or something assigned in
    the loop, and are not reported.

    ## Example
    ```python
    for epoch in range(epochs):
        loader = DataLoader(dataset, batch_size=32, num_workers=8)
        for batch in loader:
            ...
    ```

    Use instead:
    ```python
    loader = DataLoader(dataset, batch_size=32, num_workers=8, persistent_workers=True)
    for epoch in range(epochs):
        for batch in loader:
            ...
    ```

    ## Fix safety
    No fix is offered: moving a statement out of a loop is a change of
    structure the author should make.

    ## References
    - [`torch.utils.data.DataLoader` (`persistent_workers`)](https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader)
    """

    code = "LL206"
    name = "loader-rebuilt-per-epoch"
    category = "performance"
    summary = "a DataLoader with workers constructed inside a loop with unchanging arguments"

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.calls:
            if not call.loops or not workers_on(call):
                continue
            if call.opaque_kwargs or call.opaque_positional:
                continue  # *args/**kwargs may carry what varies
            names = ctx.names.call_names.get(id(call.node), set())
            if _depends_on_loop(call, names):
                continue
            n = call.workers()
            message = (
                f"this DataLoader is constructed inside a loop with arguments that never change: every pass starts "
                f"{n} new worker processes; build it once before the loop with `persistent_workers=True`"
            )
            yield Report(call.node, message)
