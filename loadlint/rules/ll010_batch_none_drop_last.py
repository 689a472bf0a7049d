from __future__ import annotations

from typing import Iterator

from loadlint.facts.values import MISSING
from loadlint.facts.arguments import sampler_presence
from loadlint.rules.base import CallChange, Context, FixSpec, Report, Rule
from loadlint.rules.shared import is_truthy, value_text, written_in_call


class BatchNoneDropLast(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls with `batch_size=None` and a truthy
    `drop_last` (and no `batch_sampler`).

    ## Why is this bad?
    `batch_size=None` turns automatic batching off: the loader yields single
    samples, so there is no last batch to drop.  The constructor raises:

    ```
    ValueError: batch_size=None option disables auto-batching and is mutually exclusive with drop_last
    ```

    The rule is silent when either value cannot be resolved statically.

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=None, drop_last=True)
    ```

    Use instead:
    ```python
    loader = DataLoader(dataset, batch_size=None)
    ```

    ## Fix safety
    The fix removes `drop_last`.  It is safe: without batching it has no
    meaning.

    ## References
    - [PyTorch: Disable automatic batching](https://pytorch.org/docs/stable/data.html#disable-automatic-batching)
    """

    code = "LL010"
    name = "batch-none-drop-last"
    category = "crash"
    summary = "`batch_size=None` with `drop_last=True` (ValueError at construction)"
    fix_availability = "sometimes"

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.calls:
            size = call.value("batch_size")
            if size is MISSING or size is not None:
                continue
            if is_truthy(call.value("drop_last")) is not True:
                continue
            if sampler_presence(call.expr("batch_sampler"), call.scope) is not None:
                continue  # LL004
            message = (
                f"`batch_size=None` with {value_text(call, 'drop_last')} raises ValueError at construction: without "
                "batching there is no last batch to drop; remove `drop_last`"
            )
            fix = None
            if written_in_call(call, "drop_last"):
                fix = FixSpec("safe", "Remove `drop_last`", calls=[CallChange(call.node, remove=("drop_last",))])
            yield Report(call.node, message, fix)
