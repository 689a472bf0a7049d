from __future__ import annotations

from typing import Iterator

import libcst as cst

from loadlint.facts.loaders import LoaderCall
from loadlint.facts.names import Key
from loadlint.facts.values import MISSING
from loadlint.rules.base import Context, Report, Rule

_LOCKED = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")


class LoaderAttributeReassigned(Rule):
    """
    ## What it does
    Checks for assignments to `batch_size`, `batch_sampler`, `sampler`,
    `drop_last`, `dataset` or `persistent_workers` on a `DataLoader` after it
    was constructed, and for a positive `num_workers` assigned to a loader
    constructed without workers.  The finding is reported at the
    assignment.

    ## Why is this bad?
    These attributes determine the sampler and iterator built in
    `__init__`; changing them later would silently have no effect, so
    `DataLoader.__setattr__` refuses:

    ```
    ValueError: batch_size attribute should not be set after DataLoader is initialized
    ```

    Typical cases: growing the batch size during training, or swapping the
    sampler of an existing loader for evaluation.

    `num_workers` may be assigned, but on a loader constructed without
    workers (and without `prefetch_factor`) a positive value fails at the
    first batch, because torch only sets `prefetch_factor` to its default of
    2 when the loader is constructed with workers:

    ```
    TypeError: '<=' not supported between instances of 'NoneType' and 'int'
    ```

    Only loaders constructed from `DataLoader` itself are followed (a
    subclass may allow it), through a name bound once or a `self.` attribute.

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=32)
    loader.batch_size = 64
    ```

    Use instead:
    ```python
    loader = DataLoader(dataset, batch_size=32)
    loader = DataLoader(dataset, batch_size=64)
    ```

    ## Fix safety
    No fix is offered: re-creating the loader may need the other arguments,
    which the author should pass on.

    ## References
    - [`torch.utils.data.DataLoader`](https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader)
    """

    code = "LL011"
    name = "loader-attribute-reassigned"
    category = "crash"
    summary = "assigning `batch_size`/`sampler`/... on a constructed DataLoader (ValueError)"

    def check(self, ctx: Context) -> Iterator[Report]:
        owners: dict[Key, LoaderCall] = {}
        for call in ctx.calls:
            if call.key is None:
                continue
            if not call.key[1].startswith("self."):
                owner = call.scope.lookup(call.key[1])
                if owner is None or len(owner[1]) != 1:
                    continue  # rebound: the name may hold something else by then
            for key in ctx.keys_of(call):
                owners[key] = call
        for assignment in ctx.loaders.attr_assignments:
            loader = owners.get(assignment.key)
            if loader is None:
                continue
            node, attr = assignment.statement, assignment.attr
            if attr in _LOCKED:
                yield Report(node, (
                    f"assigning `{attr}` on a constructed DataLoader raises ValueError: the loader built its sampler "
                    "from it already; pass the value when constructing the DataLoader, or build a new one"
                ))
            elif attr == "num_workers" and self._starts_workers_late(loader, node):
                yield Report(node, (
                    "assigning `num_workers` on a DataLoader constructed without workers raises TypeError at the "
                    "first batch: its `prefetch_factor` stayed None; pass `num_workers` when constructing it"
                ))

    @staticmethod
    def _starts_workers_late(call: LoaderCall, node: cst.CSTNode) -> bool:
        """torch sets ``prefetch_factor`` to 2 only when constructed with workers."""
        if type(node) is not cst.Assign:
            return False
        workers = call.workers()
        prefetch = call.value("prefetch_factor")
        if type(workers) is not int or workers != 0 or (prefetch is not MISSING and prefetch is not None):
            return False
        value = Context.evaluate(node.value, call.scope)
        return type(value) is int and value > 0
