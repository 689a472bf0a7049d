"""LL211 (manual-pin-in-loop): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        for x in loader:
            x = x.cuda(non_blocking=True)
    """),
    # Not a batch of the loader.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2)
        buffer = make_buffer().pin_memory()
        for x in loader:
            buffer.copy_(x)
    """),
]
INVALID = [
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=2)
        for x, y in loader:
            x = x.pin_memory().cuda(non_blocking=True)
            y = y.pin_memory().cuda(non_blocking=True)
        """,
        message="`.pin_memory()` on this loader's batches in the loop pins on the training thread, synchronously; "
        "let the DataLoader pin in its background thread with `pin_memory=True`",
        fixed="""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True)
        for x, y in loader:
            x = x.cuda(non_blocking=True)
            y = y.cuda(non_blocking=True)
        """,
        line=2,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True)
        for epoch in range(2):
            for batch in loader:
                batch = batch.pin_memory()
        """,
        fixed="""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True)
        for epoch in range(2):
            for batch in loader:
                batch = batch
        """,
    ),
]
