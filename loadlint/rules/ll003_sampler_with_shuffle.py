from __future__ import annotations

from typing import Iterator

import libcst as cst

from loadlint.facts.loaders import LoaderCall
from loadlint.facts.arguments import sampler_presence
from loadlint.rules.base import CallChange, Context, FixSpec, Report, Rule
from loadlint.rules.shared import is_truthy, value_text, written_in_call


class SamplerWithShuffle(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls that pass a `sampler` together with a truthy
    `shuffle`, also when the sampler is conditional
    (`sampler = DistributedSampler(ds) if distributed else None`).

    ## Why is this bad?
    The sampler decides the order; `shuffle=True` asks the DataLoader to
    build its own `RandomSampler`.  The two cannot be combined, and the
    constructor raises:

    ```
    ValueError: sampler option is mutually exclusive with shuffle
    ```

    With a conditional sampler the crash happens only on the branch that
    passes one, typically the distributed run on the cluster, after a local
    test passed.

    The rule is silent for `shuffle=(sampler is None)`, the idiom of
    `DistributedSampler`'s documentation, and when the sampler or the shuffle
    value cannot be resolved statically (a helper function may return None).

    ## Example
    ```python
    sampler = DistributedSampler(dataset) if distributed else None
    loader = DataLoader(dataset, batch_size=32, sampler=sampler, shuffle=True)
    ```

    Use instead:
    ```python
    sampler = DistributedSampler(dataset) if distributed else None
    loader = DataLoader(dataset, batch_size=32, sampler=sampler, shuffle=(sampler is None))
    ```

    ## Fix safety
    The fix removes `shuffle` when a sampler is always passed (the sampler
    already decides the order; a `DistributedSampler` shuffles by default),
    and replaces it with `shuffle=(<sampler> is None)` when the sampler is a
    name bound to a conditional, which keeps the shuffling of the branch
    without a sampler.  Both are safe.  No fix is offered for an inline
    conditional sampler.

    ## References
    - [`DistributedSampler`](https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler)
    """

    code = "LL003"
    name = "sampler-with-shuffle"
    category = "crash"
    summary = "`sampler` together with `shuffle=True` (ValueError at construction)"
    fix_availability = "sometimes"

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.calls:
            if is_truthy(call.value("shuffle")) is not True:
                continue
            if ctx.is_iterable_dataset(call):
                continue  # LL008 reports it: the IterableDataset check comes first
            sampler = call.expr("sampler")
            presence = sampler_presence(sampler, call.scope)
            if presence is None:
                continue
            when = "raises ValueError at construction" if presence == "always" else (
                "raises ValueError at construction whenever the sampler is not None"
            )
            message = (
                f"`sampler` with {value_text(call, 'shuffle')} {when}: the sampler already decides the order; "
                + ("remove `shuffle`" if presence == "always" else "pass `shuffle=(sampler is None)`")
            )
            yield Report(call.node, message, self._fix(call, presence, sampler))

    @staticmethod
    def _fix(call: LoaderCall, presence: str, sampler: cst.BaseExpression | None) -> FixSpec | None:
        if not written_in_call(call, "shuffle"):
            return None
        if presence == "always":
            return FixSpec("safe", "Remove `shuffle`", calls=[CallChange(call.node, remove=("shuffle",))])
        if type(sampler) is cst.Name:
            code = f"({sampler.value} is None)"
            return FixSpec("safe", f"Set `shuffle={code}`", calls=[CallChange(call.node, {"shuffle": code})])
        return None
