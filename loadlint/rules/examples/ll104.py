"""LL104 (unsharded-iterable-dataset): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        from torch.utils.data import DataLoader, IterableDataset, get_worker_info
        class Lines(IterableDataset):
            def __iter__(self):
                info = get_worker_info()
                start = info.id if info else 0
                yield from range(start, 100, info.num_workers if info else 1)
        loader = DataLoader(Lines(), num_workers=2)
    """),
    # A helper method that shards counts.
    Valid("""
        import torch
        from torch.utils.data import DataLoader, IterableDataset
        class Lines(IterableDataset):
            def _shard(self):
                return torch.utils.data.get_worker_info()
            def __iter__(self):
                info = self._shard()
                yield from range(10)
        loader = DataLoader(Lines(), num_workers=2)
    """),
    Valid("""
        from torch.utils.data import DataLoader, IterableDataset
        class Lines(IterableDataset):
            def __iter__(self):
                yield from range(10)
        loader = DataLoader(Lines(), num_workers=2, worker_init_fn=shard_worker)
    """),
    Valid("""
        from torch.utils.data import DataLoader, IterableDataset
        class Lines(IterableDataset):
            def __iter__(self):
                yield from range(10)
        loader = DataLoader(Lines(), num_workers=0)
    """),
]
INVALID = [
    Invalid(
        """
        from torch.utils.data import DataLoader, IterableDataset
        class Lines(IterableDataset):
            def __init__(self, path):
                self.path = path
            def __iter__(self):
                with open(self.path) as f:
                    yield from f
        loader = DataLoader(Lines("train.txt"), batch_size=32, num_workers=4)
        """,
        message="`Lines.__iter__` never calls `get_worker_info()`: each of the 4 workers yields the whole stream, "
        "so every sample arrives 4 times; split the stream by `get_worker_info().id`",
        line=8,
    ),
    Invalid(
        """
        import torch
        class Stream(torch.utils.data.IterableDataset):
            def __iter__(self):
                return iter(range(100))
        WORKERS = 2
        def main():
            stream = Stream()
            return torch.utils.data.DataLoader(stream, num_workers=WORKERS)
        """,
    ),
]
