"""LL008 (iterable-dataset-with-sampler): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        from torch.utils.data import DataLoader, IterableDataset
        class Stream(IterableDataset):
            def __iter__(self):
                yield from range(8)
        loader = DataLoader(Stream(), batch_size=4, shuffle=False)
    """),
    # A map-style dataset may be shuffled.
    Valid("""
        from torch.utils.data import DataLoader, Dataset
        class Items(Dataset):
            def __getitem__(self, i):
                return i
            def __len__(self):
                return 8
        loader = DataLoader(Items(), batch_size=4, shuffle=True)
    """),
    # A class of unknown kind stays silent.
    Valid("""
        from torch.utils.data import DataLoader
        from mylib import Shards
        loader = DataLoader(Shards(), batch_size=4, shuffle=True)
    """),
    # shuffle is accepted for an IterDataPipe.
    Valid("""
        from torch.utils.data import DataLoader, IterDataPipe
        class Pipe(IterDataPipe):
            def __iter__(self):
                yield 1
        loader = DataLoader(Pipe(), batch_size=4, shuffle=True)
    """),
]
INVALID = [
    Invalid(
        """
        from torch.utils.data import DataLoader, IterableDataset
        class Stream(IterableDataset):
            def __iter__(self):
                yield from range(8)
        loader = DataLoader(Stream(), batch_size=4, shuffle=True)
        """,
        message="`shuffle=True` with the IterableDataset `Stream` raises ValueError at construction: an iterable "
        "dataset decides its own order; remove it and shuffle inside the stream",
        line=5,
    ),
    Invalid(
        """
        import torch
        from torch.utils.data import DataLoader, IterableDataset, SequentialSampler
        class Base(IterableDataset):
            pass
        class Stream(Base):
            def __iter__(self):
                yield from range(8)
        stream = Stream()
        loader = DataLoader(stream, batch_size=4, sampler=SequentialSampler(range(8)))
        """,
        message="`sampler` with the IterableDataset `Stream` raises ValueError at construction: an iterable "
        "dataset decides its own order; remove it and shuffle inside the stream",
    ),
    Invalid(
        """
        from torch.utils.data import BatchSampler, DataLoader, IterDataPipe, SequentialSampler
        class Pipe(IterDataPipe):
            def __iter__(self):
                yield 1
        loader = DataLoader(Pipe(), batch_sampler=BatchSampler(SequentialSampler(range(8)), 4, False))
        """,
    ),
]
