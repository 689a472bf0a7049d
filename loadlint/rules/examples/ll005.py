"""LL005 (invalid-loader-argument): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=2, timeout=30, prefetch_factor=4, drop_last=True)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=64 // 2, num_workers=0, timeout=0)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=None)
    """),
    # Unresolvable values stay silent.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=args.bs, num_workers=args.workers, drop_last=args.drop)
    """),
    # Without workers, prefetch_factor=0 is LL001's finding, not this one.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, prefetch_factor=0)
    """),
    # A batch sampler makes batch_size/drop_last LL004's business.
    Valid("""
        from torch.utils.data import BatchSampler, DataLoader, SequentialSampler
        loader = DataLoader(ds, batch_size=0, batch_sampler=BatchSampler(SequentialSampler(ds), 2, False))
    """),
]
INVALID = [
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=-1)
        """,
        message="`num_workers=-1` raises ValueError at construction: -1 does not mean \"all cores\" in PyTorch; "
        "pass a count of workers, or 0 to load in the main process",
        line=2,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, timeout=-5)
        """,
        message="`timeout=-5` raises ValueError at construction: the timeout must be 0 (none) or a positive "
        "number of seconds",
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=2, prefetch_factor=-1)
        """,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=1, prefetch_factor=0)
        """,
        message="`prefetch_factor=0` raises AssertionError at the first batch: each worker must load at least "
        "one batch ahead; use a positive number (2 is the default)",
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        GLOBAL_BATCH = 16
        WORLD = 2
        loader = DataLoader(ds, batch_size=GLOBAL_BATCH / WORLD)
        """,
        message="`batch_size=GLOBAL_BATCH / WORLD` raises ValueError at construction: true division always gives "
        "a float; use floor division `//`",
        fixed="""
        from torch.utils.data import DataLoader
        GLOBAL_BATCH = 16
        WORLD = 2
        loader = DataLoader(ds, batch_size=GLOBAL_BATCH // WORLD)
        """,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        def build(ds, args, world_size):
            return DataLoader(ds, args.batch_size / world_size, True)
        """,
        fixed="""
        from torch.utils.data import DataLoader
        def build(ds, args, world_size):
            return DataLoader(ds, args.batch_size // world_size, True)
        """,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=0)
        """,
        message="`batch_size=0` raises ValueError at construction: the batch size must be positive; pass a "
        "positive int (or None to disable batching)",
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=True)
        """,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=8.0)
        """,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, drop_last=1)
        """,
        message="`drop_last=1` raises ValueError at construction: `drop_last` must be a bool; pass True or False",
        fixed="""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, drop_last=True)
        """,
    ),
]
