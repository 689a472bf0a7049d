from __future__ import annotations

from typing import Iterator

from loadlint.facts.values import MISSING, UNKNOWN
from loadlint.facts.arguments import sampler_presence
from loadlint.rules.base import Context, Report, Rule
from loadlint.rules.shared import is_truthy, value_text


class BatchSamplerConflict(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls that pass a `batch_sampler` together with a
    `batch_size` other than 1 (`None` included), a truthy `shuffle`, a
    `sampler`, or a truthy `drop_last`.

    ## Why is this bad?
    A batch sampler yields whole batches of indices: it already decides the
    batch size, the order and what happens to the last batch.  The
    constructor refuses any of the per-sample options next to it:

    ```
    ValueError: batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last
    ```

    `batch_size=None` trips it too, because torch checks `batch_size != 1`.

    The rule is silent when the batch sampler or the conflicting value cannot
    be resolved statically.

    ## Example
    ```python
    batches = BatchSampler(RandomSampler(dataset), batch_size=32, drop_last=True)
    loader = DataLoader(dataset, batch_sampler=batches, batch_size=32, drop_last=True)
    ```

    Use instead:
    ```python
    batches = BatchSampler(RandomSampler(dataset), batch_size=32, drop_last=True)
    loader = DataLoader(dataset, batch_sampler=batches)
    ```

    ## Fix safety
    No fix is offered: which of the two settings the author meant (the batch
    sampler's or the loader's) is a decision to make by reading the code.

    ## References
    - [`torch.utils.data.BatchSampler`](https://pytorch.org/docs/stable/data.html#torch.utils.data.BatchSampler)
    """

    code = "LL004"
    name = "batch-sampler-conflict"
    category = "crash"
    summary = "`batch_sampler` with `batch_size`/`shuffle`/`sampler`/`drop_last` (ValueError at construction)"

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.calls:
            if sampler_presence(call.expr("batch_sampler"), call.scope) is None:
                continue
            if ctx.is_iterable_dataset(call):
                continue  # LL008
            conflicts = []
            size = call.value("batch_size")
            if size is not MISSING and size is not UNKNOWN and not (type(size) is int and size == 1):
                conflicts.append(value_text(call, "batch_size"))
            if is_truthy(call.value("shuffle")) is True:
                conflicts.append(value_text(call, "shuffle"))
            if sampler_presence(call.expr("sampler"), call.scope) is not None:
                conflicts.append("`sampler`")
            if is_truthy(call.value("drop_last")) is True:
                conflicts.append(value_text(call, "drop_last"))
            if not conflicts:
                continue
            listed = ", ".join(conflicts)
            message = (
                f"`batch_sampler` with {listed} raises ValueError at construction: the batch sampler already decides "
                "batch size, order and the last batch; set them on the batch sampler and drop them here"
            )
            yield Report(call.node, message)
