"""LL014 (unpicklable-dataset-handle): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid
from loadlint.types import HardwareProfile

_MACOS = HardwareProfile(usable_cpus=8, gpu_count=0, platform="macos", python="3.12",
                         declared=frozenset({"cpus", "gpus", "platform", "python"}))
_LINUX_314 = HardwareProfile(usable_cpus=8, gpu_count=0, platform="linux", python="3.14",
                             declared=frozenset({"cpus", "gpus", "platform", "python"}))
_LINUX_312 = HardwareProfile(usable_cpus=8, gpu_count=0, platform="linux", python="3.12",
                             declared=frozenset({"cpus", "gpus", "platform", "python"}))


VALID = [
    # Opened lazily, in the worker.
    Valid(
        """
        import lmdb
        from torch.utils.data import DataLoader, Dataset
        class Frames(Dataset):
            def __init__(self, path):
                self.path = path
                self.env = None
            def __getitem__(self, i):
                if self.env is None:
                    self.env = lmdb.open(self.path, readonly=True)
                return self.env
        loader = DataLoader(Frames("db"), num_workers=4, multiprocessing_context="spawn")
        """
    ),
    # The class says what pickling keeps.
    Valid(
        """
        import h5py
        from torch.utils.data import DataLoader, Dataset
        class Volumes(Dataset):
            def __init__(self, path):
                self.path = path
                self.file = h5py.File(path, "r")
            def __getstate__(self):
                return {"path": self.path}
        loader = DataLoader(Volumes("v.h5"), num_workers=4, multiprocessing_context="spawn")
        """
    ),
    # Fork (Linux before Python 3.14): the workers inherit the handle.
    Valid(
        """
        from torch.utils.data import DataLoader, Dataset
        class Lines(Dataset):
            def __init__(self, path):
                self.file = open(path)
        loader = DataLoader(Lines("a.txt"), num_workers=2)
        """,
        profile=_LINUX_312,
    ),
    Valid(
        """
        from torch.utils.data import DataLoader, Dataset
        class Lines(Dataset):
            def __init__(self, path):
                self.file = open(path)
        loader = DataLoader(Lines("a.txt"), num_workers=2, multiprocessing_context="fork")
        """,
    ),
    # Opened to read the length, then dropped.
    Valid(
        """
        import lmdb
        from torch.utils.data import DataLoader, Dataset
        class Frames(Dataset):
            def __init__(self, path):
                self.env = lmdb.open(path)
                self.length = self.env.stat()["entries"]
                self.env.close()
                self.env = None
        loader = DataLoader(Frames("db"), num_workers=4, multiprocessing_context="spawn")
        """
    ),
    # Read in full: no handle is kept.
    Valid(
        """
        from torch.utils.data import DataLoader, Dataset
        class Lines(Dataset):
            def __init__(self, path):
                self.lines = open(path).readlines()
        loader = DataLoader(Lines("a.txt"), num_workers=2, multiprocessing_context="spawn")
        """
    ),
    # No workers: nothing is pickled.
    Valid(
        """
        from torch.utils.data import DataLoader, Dataset
        class Lines(Dataset):
            def __init__(self, path):
                self.file = open(path)
        loader = DataLoader(Lines("a.txt"), multiprocessing_context=None)
        """
    ),
    # An imported base may define `__getstate__`.
    Valid(
        """
        import lmdb
        from torch.utils.data import DataLoader
        from mylib import PicklableDataset
        class Frames(PicklableDataset):
            def __init__(self, path):
                self.env = lmdb.open(path)
        loader = DataLoader(Frames("db"), num_workers=4, multiprocessing_context="spawn")
        """
    ),
]
INVALID = [
    Invalid(
        """
        import lmdb
        from torch.utils.data import DataLoader, Dataset
        class Frames(Dataset):
            def __init__(self, path):
                self.env = lmdb.open(path, readonly=True, lock=False)
            def __len__(self):
                return self.env.stat()["entries"]
        loader = DataLoader(Frames("db"), batch_size=32, num_workers=4)
        """,
        message="`Frames.__init__` stores an `lmdb` environment on the dataset (`self.env = lmdb.open(...)`), and "
        "`loader`'s 4 workers may start with spawn or forkserver (the target platform is macos, where workers are "
        "spawned): starting them pickles the dataset, which fails (`TypeError: cannot pickle 'Environment' "
        "object`); open it in the worker instead: `self.env = None` in `__init__`, opened on the first "
        "`__getitem__` (or in a `worker_init_fn`)",
        profile=_MACOS,
        line=5,
    ),
    Invalid(
        """
        import h5py as h5
        from torch.utils.data import DataLoader, Dataset
        class Volumes(Dataset):
            def __init__(self, path):
                super().__init__()
                self.file = h5.File(path, "r")
        loader = DataLoader(Volumes("v.h5"), num_workers=2)
        """,
        message="`Volumes.__init__` stores an open `h5py` file on the dataset (`self.file = h5.File(...)`), and "
        "`loader`'s 2 workers may start with spawn or forkserver (Python 3.14 on Linux starts workers with "
        "forkserver): starting them pickles the dataset, which fails (`TypeError: h5py objects cannot be "
        "pickled`); open it in the worker instead: `self.file = None` in `__init__`, opened on the first "
        "`__getitem__` (or in a `worker_init_fn`)",
        profile=_LINUX_314,
    ),
    Invalid(
        """
        import multiprocessing
        from torch.utils.data import DataLoader, Dataset
        class Lines(Dataset):
            def __init__(self, path):
                self.file = open(path, "rb")
        if __name__ == "__main__":
            multiprocessing.set_start_method("spawn")
            loader = DataLoader(Lines("a.bin"), num_workers=2)
        """,
        message="`Lines.__init__` stores an open file on the dataset (`self.file = open(...)`), and `loader`'s 2 "
        "workers may start with spawn or forkserver (`set_start_method(\"spawn\")`): starting them pickles the "
        "dataset, which fails (`TypeError: cannot pickle '_io.BufferedReader' object`); open it in the worker "
        "instead: `self.file = None` in `__init__`, opened on the first `__getitem__` (or in a `worker_init_fn`)",
        profile=_LINUX_312,
    ),
    # A base class's `__init__`, and a loader named through a variable.
    Invalid(
        """
        from torch.utils.data import DataLoader, Dataset
        class Base(Dataset):
            def __init__(self, path):
                self.log = open(path, "a")
        class Lines(Base):
            pass
        data = Lines("a.txt")
        loader = DataLoader(data, num_workers=2, multiprocessing_context="forkserver")
        """,
        line=4,
    ),
]
