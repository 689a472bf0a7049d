from __future__ import annotations

from typing import Iterator

from loadlint.facts.datasets import DATAPIPE_BASES
from loadlint.facts.arguments import sampler_presence
from loadlint.rules.base import Context, Report, Rule
from loadlint.rules.shared import is_truthy, value_text


class IterableDatasetWithSampler(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls over an `IterableDataset` (an instance of a
    subclass defined in the module, or of an imported iterable dataset class)
    that pass a truthy `shuffle`, a `sampler` or a `batch_sampler`.

    ## Why is this bad?
    An iterable dataset decides its own order: there are no indices for a
    sampler to draw.  The constructor raises one of:

    ```
    ValueError: DataLoader with IterableDataset: expected unspecified shuffle option, but got shuffle=True
    ValueError: DataLoader with IterableDataset: expected unspecified sampler option, but got sampler=...
    ValueError: DataLoader with IterableDataset: expected unspecified batch_sampler option, but got batch_sampler=...
    ```

    It happens when a map-style dataset is turned into a streaming one and
    the loader call is left as it was.  `shuffle` is allowed for an
    `IterDataPipe` (torch applies it to the pipe's shuffler), so only
    samplers are reported there.

    ## Example
    ```python
    class Shards(IterableDataset):
        def __iter__(self):
            ...

    loader = DataLoader(Shards(files), batch_size=32, shuffle=True)
    ```

    Use instead:
    ```python
    loader = DataLoader(Shards(files, shuffle=True), batch_size=32)
    ```
    (shuffle inside the stream, for example with a shuffle buffer).

    ## Fix safety
    No fix is offered: dropping the argument silently turns shuffling off.

    ## References
    - [PyTorch: Iterable-style datasets](https://pytorch.org/docs/stable/data.html#iterable-style-datasets)
    """

    code = "LL008"
    name = "iterable-dataset-with-sampler"
    category = "crash"
    summary = "`shuffle`/`sampler`/`batch_sampler` on an `IterableDataset` (ValueError at construction)"

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.calls:
            if ctx.is_iterable_dataset(call) is not True:
                continue
            qualified, cls = ctx.dataset_class(call)
            bases = ctx.names.class_bases(cls) if cls is not None else {qualified}
            datapipe = any(b in DATAPIPE_BASES for b in bases)
            found = None
            if not datapipe and is_truthy(call.value("shuffle")) is True:
                found = value_text(call, "shuffle")
            elif sampler_presence(call.expr("sampler"), call.scope) is not None:
                found = "`sampler`"
            elif sampler_presence(call.expr("batch_sampler"), call.scope) is not None:
                found = "`batch_sampler`"
            if found is None:
                continue
            name = cls.name if cls is not None else (qualified or "the dataset").rsplit(".", 1)[-1]
            message = (
                f"{found} with the IterableDataset `{name}` raises ValueError at construction: an iterable dataset "
                "decides its own order; remove it and shuffle inside the stream"
            )
            yield Report(call.node, message)
