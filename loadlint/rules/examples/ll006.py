"""LL006 (timeout-without-workers): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=2, timeout=60)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, timeout=0)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, timeout=args.timeout)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        def build(ds, **kwargs):
            return DataLoader(ds, timeout=60, **kwargs)
    """),
]
INVALID = [
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, timeout=60)
        """,
        message="`timeout=60` without `num_workers` raises AssertionError at the first batch: the timeout applies "
        "to workers only; remove `timeout` or start workers",
        fixed="""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4)
        """,
        line=2,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, 4, False, None, None, 0, None, False, False, 1.5)
        """,
        fixed="""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, 4, False, None, None, 0, None, False, False)
        """,
    ),
    # Carried by a dict: the finding stands, with no fix to edit it.
    Invalid(
        """
        from torch.utils.data import DataLoader
        def build(ds):
            options = {"timeout": 60}
            return DataLoader(ds, **options)
        """,
        message="`timeout=60` without `num_workers` raises AssertionError at the first batch: the timeout applies "
        "to workers only; remove `timeout` or start workers",
    ),
]
