from __future__ import annotations

from typing import Iterator

from loadlint.facts.values import MISSING, UNKNOWN
from loadlint.rules.base import (
    CallChange,
    Context,
    FixSpec,
    Report,
    Rule,
)
from loadlint.rules.shared import (
    torch_before_2,
    value_text,
    workers_off,
    workers_text,
    written_in_call,
)


class PrefetchWithoutWorkers(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls that pass a `prefetch_factor` other than
    `None` while `num_workers` is missing or `0`.

    On a torch 1.x target (`--target torch=1.13`), where the default was `2`
    and the check was `prefetch_factor != 2`, any other value is reported,
    `prefetch_factor=None` included.

    The known DataLoader subclasses (MONAI's `DataLoader`, PyG's
    `DataLoader` and `DenseDataLoader`: README, Rules) are checked like
    torch's own: they forward these keywords to it.

    ## Why is this bad?
    `prefetch_factor` is the number of batches each worker loads ahead; with
    no workers there is nothing to prefetch, and the constructor raises:

    ```
    ValueError: prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None.
    ```

    It typically appears when a debug run sets `num_workers=0` and keeps the
    rest of the configuration, or after an upgrade from torch 1.x, where
    `prefetch_factor=2` was the (accepted) default.

    The rule is silent when either value cannot be resolved statically.

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=32, num_workers=0, prefetch_factor=4)
    ```

    Use instead:
    ```python
    loader = DataLoader(dataset, batch_size=32, num_workers=0)
    ```

    ## Fix safety
    The fix removes `prefetch_factor`.  It is safe: without workers the value
    has no effect, and torch refuses it.

    ## References
    - [`torch.utils.data.DataLoader`](https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader)
    """

    code = "LL001"
    name = "prefetch-without-workers"
    category = "crash"
    summary = "`prefetch_factor` without worker processes (ValueError at construction)"
    fix_availability = "sometimes"
    needs_hardware = True

    def check(self, ctx: Context) -> Iterator[Report]:
        old = torch_before_2(ctx.profile)
        for call in ctx.all_calls:
            if not workers_off(call):
                continue
            value = call.value("prefetch_factor")
            if value is MISSING or value is UNKNOWN:
                continue
            if old:
                if value == 2 and type(value) is int:
                    continue
            elif value is None:
                continue
            version = f" on torch {ctx.profile.torch}" if old else ""
            message = (
                f"{value_text(call, 'prefetch_factor')} {workers_text(call)} raises ValueError at construction{version}: "
                "prefetching needs worker processes; remove `prefetch_factor` or start workers"
            )
            fix = None
            if written_in_call(call, "prefetch_factor"):
                fix = FixSpec("safe", "Remove `prefetch_factor`", calls=[CallChange(call.node, remove=("prefetch_factor",))])
            yield Report(call.node, message, fix)
