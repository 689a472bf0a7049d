from __future__ import annotations

from typing import Iterator

from loadlint.rules.base import Context, Invalid, Report, Rule, Valid

_LOCKED = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")


class LoaderAttributeReassigned(Rule):
    """
    ## What it does
    Checks for assignments to `batch_size`, `batch_sampler`, `sampler`,
    `drop_last`, `dataset` or `persistent_workers` on a `DataLoader` after it
    was constructed.  The finding is reported at the assignment.

    ## Why is this bad?
    These attributes determine the sampler and iterator built in
    `__init__`; changing them later would silently have no effect, so
    `DataLoader.__setattr__` refuses:

    ```
    ValueError: batch_size attribute should not be set after DataLoader is initialized
    ```

    Typical cases: growing the batch size during training, or swapping the
    sampler of an existing loader for evaluation.

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
    summary = "assigning `batch_size`/`sampler`/... on a constructed DataLoader (ValueError)"

    def check(self, ctx: Context) -> Iterator[Report]:
        info = ctx.info
        keys = set()
        for call in ctx.calls:
            if call.key is None:
                continue
            if not call.key[1].startswith("self."):
                owner = call.scope.lookup(call.key[1])
                if owner is None or len(owner[1]) != 1:
                    continue  # rebound: the name may hold something else by then
            keys |= info.keys_of(call)
        for target, key, attr in info.attr_assignments:
            if attr not in _LOCKED or key not in keys:
                continue
            node = info.attr_assign_nodes.get(id(target), target)
            message = (
                f"assigning `{attr}` on a constructed DataLoader raises ValueError: the loader built its sampler "
                "from it already; pass the value when constructing the DataLoader, or build a new one"
            )
            yield Report(node, message)

    VALID = [
        Valid("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=4)
            loader.pin_memory = False
        """),
        # Not a DataLoader.
        Valid("""
            from mylib import Loader
            loader = Loader(ds)
            loader.batch_size = 64
        """),
        # Rebound before the assignment: unknown.
        Valid("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=4)
            loader = wrap(loader)
            loader.batch_size = 64
        """),
    ]
    INVALID = [
        Invalid(
            """
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=4)
            loader.batch_size = 8
            """,
            message="assigning `batch_size` on a constructed DataLoader raises ValueError: the loader built its "
            "sampler from it already; pass the value when constructing the DataLoader, or build a new one",
            line=3,
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader, SequentialSampler
            class Trainer:
                def setup(self, ds):
                    self.loader = DataLoader(ds, batch_size=4)
                def evaluate(self, ds):
                    self.loader.sampler = SequentialSampler(ds)
            """,
            line=6,
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True)
            loader.persistent_workers = False
            """,
        ),
    ]
