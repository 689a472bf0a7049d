"""LL004 (batch-sampler-conflict): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        from torch.utils.data import BatchSampler, DataLoader, RandomSampler
        batches = BatchSampler(RandomSampler(ds), batch_size=4, drop_last=True)
        loader = DataLoader(ds, batch_sampler=batches)
    """),
    # batch_size=1 is the default, and False values are fine.
    Valid("""
        from torch.utils.data import BatchSampler, DataLoader, SequentialSampler
        loader = DataLoader(ds, batch_size=1, shuffle=False, drop_last=False,
                            batch_sampler=BatchSampler(SequentialSampler(ds), 4, False))
    """),
    Valid("""
        from torch.utils.data import DataLoader
        def build(ds, bs):
            return DataLoader(ds, batch_sampler=bs, batch_size=8)
    """),
    Valid("""
        from torch.utils.data import BatchSampler, DataLoader, SequentialSampler
        loader = DataLoader(ds, batch_size=args.bs, batch_sampler=BatchSampler(SequentialSampler(ds), 4, False))
    """),
]
INVALID = [
    Invalid(
        """
        from torch.utils.data import BatchSampler, DataLoader, SequentialSampler
        batches = BatchSampler(SequentialSampler(ds), batch_size=4, drop_last=False)
        loader = DataLoader(ds, batch_size=4, batch_sampler=batches)
        """,
        message="`batch_sampler` with `batch_size=4` raises ValueError at construction: the batch sampler already "
        "decides batch size, order and the last batch; set them on the batch sampler and drop them here",
        line=3,
    ),
    Invalid(
        """
        from torch.utils.data import BatchSampler, DataLoader, SequentialSampler
        batches = BatchSampler(SequentialSampler(ds), batch_size=4, drop_last=False)
        loader = DataLoader(ds, batch_size=None, batch_sampler=batches)
        """,
    ),
    Invalid(
        """
        from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler
        batches = BatchSampler(SequentialSampler(ds), batch_size=4, drop_last=False)
        loader = DataLoader(ds, shuffle=True, sampler=RandomSampler(ds), drop_last=True, batch_sampler=batches)
        """,
        message="`batch_sampler` with `shuffle=True`, `sampler`, `drop_last=True` raises ValueError at "
        "construction: the batch sampler already decides batch size, order and the last batch; set them on the "
        "batch sampler and drop them here",
    ),
]
