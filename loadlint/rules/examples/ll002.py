"""LL002 (persistent-without-workers): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, persistent_workers=False)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=args.workers, persistent_workers=True)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        def build(ds, nw):
            return DataLoader(ds, num_workers=nw, persistent_workers=nw > 0)
    """),
]
INVALID = [
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=0, persistent_workers=True)
        """,
        message="`persistent_workers=True` with `num_workers=0` raises ValueError at construction: there are no "
        "workers to keep alive; remove `persistent_workers` or start workers",
        fixed="""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=0)
        """,
        line=2,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        DEBUG = True
        WORKERS = 0 if DEBUG else 8
        loader = DataLoader(ds, batch_size=4, persistent_workers=True, num_workers=0)
        """,
        fixed="""
        from torch.utils.data import DataLoader
        DEBUG = True
        WORKERS = 0 if DEBUG else 8
        loader = DataLoader(ds, batch_size=4, num_workers=0)
        """,
    ),
    Invalid(
        """
        import torch
        loader = torch.utils.data.DataLoader(ds, persistent_workers=1)
        """,
        message="`persistent_workers=1` without `num_workers` raises ValueError at construction: there are no "
        "workers to keep alive; remove `persistent_workers` or start workers",
        fixed="""
        import torch
        loader = torch.utils.data.DataLoader(ds)
        """,
    ),
    # Carried by a dict: the finding stands, with no fix to edit it.
    Invalid(
        """
        from torch.utils.data import DataLoader
        def build(ds):
            options = {"persistent_workers": True}
            return DataLoader(ds, **options)
        """,
        message="`persistent_workers=True` without `num_workers` raises ValueError at construction: there are no "
        "workers to keep alive; remove `persistent_workers` or start workers",
    ),
]
