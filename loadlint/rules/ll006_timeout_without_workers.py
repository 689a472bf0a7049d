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
    value_text,
    workers_off,
    workers_text,
    written_in_call,
)


class TimeoutWithoutWorkers(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls with a positive `timeout` while
    `num_workers` is missing or `0`.

    The known DataLoader subclasses (MONAI's `DataLoader`, PyG's
    `DataLoader` and `DenseDataLoader`: README, Rules) are checked like
    torch's own: they forward these keywords to it.

    ## Why is this bad?
    `timeout` bounds how long the main process waits for a batch from a
    worker.  Without workers the constructor accepts it, and the first
    iteration fails:

    ```
    AssertionError: _SingleProcessDataLoaderIter requires timeout == 0
    ```

    So the crash comes after the model, the optimizer and often a
    checkpoint have been loaded.

    The rule is silent when either value cannot be resolved statically.

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=32, timeout=120)
    ```

    Use instead:
    ```python
    loader = DataLoader(dataset, batch_size=32)
    ```

    ## Fix safety
    The fix removes `timeout`.  It is safe: without workers there is nothing
    to wait for.

    ## References
    - [`torch.utils.data.DataLoader`](https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader)
    """

    code = "LL006"
    name = "timeout-without-workers"
    category = "crash"
    summary = "`timeout` without worker processes (AssertionError at the first batch)"
    fix_availability = "sometimes"

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.all_calls:
            if not workers_off(call):
                continue
            timeout = call.value("timeout")
            if type(timeout) not in (int, float) or timeout <= 0:
                continue
            message = (
                f"{value_text(call, 'timeout')} {workers_text(call)} raises AssertionError at the first batch: "
                "the timeout applies to workers only; remove `timeout` or start workers"
            )
            fix = None
            if written_in_call(call, "timeout"):
                fix = FixSpec("safe", "Remove `timeout`", calls=[CallChange(call.node, remove=("timeout",))])
            yield Report(call.node, message, fix)
