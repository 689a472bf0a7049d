"""LL206 (loader-rebuilt-per-epoch): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4, persistent_workers=True)
        for epoch in range(3):
            for batch in loader:
                step(batch)
    """),
    # Curriculum: the batch size changes with the epoch.
    Valid("""
        from torch.utils.data import DataLoader
        for epoch in range(3):
            loader = DataLoader(ds, batch_size=16 * (epoch + 1), num_workers=4)
            for batch in loader:
                step(batch)
    """),
    # The dataset is rebuilt in the loop.
    Valid("""
        from torch.utils.data import DataLoader
        for epoch in range(3):
            subset = resample(ds)
            loader = DataLoader(subset, num_workers=4)
            for batch in loader:
                step(batch)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        for name, part in splits.items():
            loader = DataLoader(part, num_workers=4)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        for epoch in range(3):
            loader = DataLoader(ds, batch_size=4)
    """),
]
INVALID = [
    Invalid(
        """
        from torch.utils.data import DataLoader
        for epoch in range(3):
            loader = DataLoader(ds, batch_size=4, num_workers=2)
            for batch in loader:
                step(batch)
        """,
        message="this DataLoader is constructed inside a loop with arguments that never change: every pass starts "
        "2 new worker processes; build it once before the loop with `persistent_workers=True`",
        line=3,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        def train(model, ds, epochs, args):
            epoch = 0
            while epoch < epochs:
                loader = DataLoader(ds, batch_size=args.batch_size, shuffle=True, num_workers=8)
                for x, y in loader:
                    model(x)
                epoch += 1
        """,
    ),
]
