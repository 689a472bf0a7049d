"""LL003 (sampler-with-shuffle): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        from torch.utils.data import DataLoader, DistributedSampler
        sampler = DistributedSampler(ds) if distributed else None
        loader = DataLoader(ds, batch_size=8, sampler=sampler, shuffle=(sampler is None))
    """),
    Valid("""
        from torch.utils.data import DataLoader, RandomSampler
        loader = DataLoader(ds, batch_size=8, sampler=RandomSampler(ds), shuffle=False)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=8, sampler=None, shuffle=True)
    """),
    # A helper may return None; a parameter may be None.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=8, sampler=make_sampler(ds), shuffle=True)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        def build(ds, sampler):
            return DataLoader(ds, sampler=sampler, shuffle=True)
    """),
    Valid("""
        from torch.utils.data import DataLoader, RandomSampler
        loader = DataLoader(ds, sampler=RandomSampler(ds), shuffle=args.shuffle)
    """),
]
INVALID = [
    Invalid(
        """
        from torch.utils.data import DataLoader, SequentialSampler
        loader = DataLoader(ds, batch_size=4, sampler=SequentialSampler(ds), shuffle=True)
        """,
        message="`sampler` with `shuffle=True` raises ValueError at construction: the sampler already decides "
        "the order; remove `shuffle`",
        fixed="""
        from torch.utils.data import DataLoader, SequentialSampler
        loader = DataLoader(ds, batch_size=4, sampler=SequentialSampler(ds))
        """,
        line=2,
    ),
    Invalid(
        """
        import torch
        from torch.utils.data import DataLoader, RandomSampler
        distributed = True
        sampler = RandomSampler(ds) if distributed else None
        loader = DataLoader(ds, batch_size=4, sampler=sampler, shuffle=True)
        """,
        message="`sampler` with `shuffle=True` raises ValueError at construction whenever the sampler is not "
        "None: the sampler already decides the order; pass `shuffle=(sampler is None)`",
        fixed="""
        import torch
        from torch.utils.data import DataLoader, RandomSampler
        distributed = True
        sampler = RandomSampler(ds) if distributed else None
        loader = DataLoader(ds, batch_size=4, sampler=sampler, shuffle=(sampler is None))
        """,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        def build(ds, rank, world):
            return DataLoader(ds, 32, True, DistributedSampler(ds, world, rank) if world > 1 else None)
        """,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader, SubsetRandomSampler
        SHUFFLE = True
        loader = DataLoader(ds, 4, SHUFFLE, SubsetRandomSampler([0, 1, 2, 3]))
        """,
        fixed="""
        from torch.utils.data import DataLoader, SubsetRandomSampler
        SHUFFLE = True
        loader = DataLoader(ds, 4, None, SubsetRandomSampler([0, 1, 2, 3]))
        """,
    ),
]
