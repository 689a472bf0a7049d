"""LL207 (iterator-recreated): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    # One batch of each loader of the dict: the loop does not repeat one.
    Valid("""
        from torch.utils.data import DataLoader
        loaders = {"train": DataLoader(a, num_workers=2), "val": DataLoader(b, num_workers=2)}
        for loader in loaders.values():
            sample = next(iter(loader))
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2)
        batches = iter(loader)
        for step in range(10):
            x = next(batches)
    """),
    # Once, outside a loop.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2)
        sample = next(iter(loader))
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=0)
        for step in range(10):
            x = next(iter(loader))
    """),
]
INVALID = [
    Invalid(
        """
        from torch.utils.data import DataLoader
        loaders = (DataLoader(a, num_workers=2), DataLoader(b, num_workers=0))
        for step in range(10):
            x = next(iter(loaders[0]))
        """,
        message="`next(iter(loaders[0]))` inside a loop creates a new iterator on every pass, restarting and "
        "priming all 2 workers for one batch; create the iterator once before the loop",
        line=4,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=2)
        for step in range(10):
            x = next(iter(loader))
        """,
        message="`next(iter(loader))` inside a loop creates a new iterator on every pass, restarting and priming "
        "all 2 workers for one batch; create the iterator once before the loop",
        line=4,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        class Trainer:
            def __init__(self, ds):
                self.train_data = DataLoader(ds, batch_size=32, num_workers=4)
            def train(self, epochs):
                for epoch in range(epochs):
                    b_sz = len(next(iter(self.train_data))[0])
        """,
    ),
]
