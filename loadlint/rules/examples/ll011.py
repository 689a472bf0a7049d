"""LL011 (loader-attribute-reassigned): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4)
        loader.pin_memory = False
    """),
    # Constructed with workers: prefetch_factor is 2, more workers are fine.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=1)
        loader.num_workers = 2
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
    # Found by running torch: prefetch_factor stays None.
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4)
        loader.num_workers = 2
        """,
        message="assigning `num_workers` on a DataLoader constructed without workers raises TypeError at the "
        "first batch: its `prefetch_factor` stayed None; pass `num_workers` when constructing it",
        line=3,
    ),
]
