"""LL010 (batch-none-drop-last): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=None)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, drop_last=True)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=None, drop_last=False)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=args.bs, drop_last=True)
    """),
]
INVALID = [
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=None, drop_last=True)
        """,
        message="`batch_size=None` with `drop_last=True` raises ValueError at construction: without batching "
        "there is no last batch to drop; remove `drop_last`",
        fixed="""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=None)
        """,
        line=2,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        BATCH = None
        loader = DataLoader(ds, BATCH, False, None, None, 0, None, False, True)
        """,
        fixed="""
        from torch.utils.data import DataLoader
        BATCH = None
        loader = DataLoader(ds, BATCH, False, None, None, 0, None, False)
        """,
    ),
    # Carried by a dict: the finding stands, with no fix to edit it.
    Invalid(
        """
        from torch.utils.data import DataLoader
        def build(ds):
            options = {"batch_size": None, "drop_last": True}
            return DataLoader(ds, **options)
        """,
        message="`batch_size=None` with `drop_last=True` raises ValueError at construction: without batching "
        "there is no last batch to drop; remove `drop_last`",
    ),
]
