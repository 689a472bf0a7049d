from __future__ import annotations

from typing import Iterator

from loadlint.rules.base import (
    CallChange,
    Context,
    FixSpec,
    Report,
    Rule,
)
from loadlint.rules.shared import (
    is_truthy,
    value_text,
    workers_off,
    workers_text,
    written_in_call,
)


class PersistentWithoutWorkers(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls with a truthy `persistent_workers` while
    `num_workers` is missing or `0`.

    The known DataLoader subclasses (MONAI's `DataLoader`, PyG's
    `DataLoader` and `DenseDataLoader`: README, Rules) are checked like
    torch's own: they forward these keywords to it.

    ## Why is this bad?
    `persistent_workers` keeps worker processes alive between epochs; with
    no workers the constructor raises:

    ```
    ValueError: persistent_workers option needs num_workers > 0
    ```

    The usual way in is a debug switch that sets `num_workers=0` and leaves
    `persistent_workers=True` in place.

    The rule is silent when either value cannot be resolved statically.

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=32, num_workers=0, persistent_workers=True)
    ```

    Use instead:
    ```python
    loader = DataLoader(dataset, batch_size=32, num_workers=0)
    ```

    ## Fix safety
    The fix removes `persistent_workers`.  It is safe: without workers there
    is nothing to keep alive.

    ## References
    - [`torch.utils.data.DataLoader`](https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader)
    """

    code = "LL002"
    name = "persistent-without-workers"
    category = "crash"
    summary = "`persistent_workers` without worker processes (ValueError at construction)"
    fix_availability = "sometimes"

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.all_calls:
            if not workers_off(call):
                continue
            if is_truthy(call.value("persistent_workers")) is not True:
                continue
            message = (
                f"{value_text(call, 'persistent_workers')} {workers_text(call)} raises ValueError at construction: "
                "there are no workers to keep alive; remove `persistent_workers` or start workers"
            )
            fix = None
            if written_in_call(call, "persistent_workers"):
                fix = FixSpec(
                    "safe", "Remove `persistent_workers`", calls=[CallChange(call.node, remove=("persistent_workers",))]
                )
            yield Report(call.node, message, fix)
