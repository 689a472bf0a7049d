"""LL012 (notebook-worker-code): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid
from loadlint.types import HardwareProfile

_MACOS = HardwareProfile(usable_cpus=8, gpu_count=0, platform="macos", declared=frozenset({"cpus", "gpus", "platform"}))


VALID = [
    # Imported from a module: the workers import it too.
    Valid(
        """
        from torch.utils.data import DataLoader
        from faces import FaceDataset
        loader = DataLoader(FaceDataset(), batch_size=8, num_workers=4, multiprocessing_context="spawn")
        """,
        path="example.ipynb",
    ),
    # No workers: everything runs in the kernel.
    Valid(
        """
        from torch.utils.data import DataLoader, Dataset
        class FaceDataset(Dataset):
            def __getitem__(self, i):
                return i
        loader = DataLoader(FaceDataset(), batch_size=8, num_workers=0, multiprocessing_context=None)
        """,
        path="example.ipynb",
    ),
    # fork copies the kernel's memory: notebook classes are there.
    Valid(
        """
        from torch.utils.data import DataLoader, Dataset
        class FaceDataset(Dataset):
            def __getitem__(self, i):
                return i
        loader = DataLoader(FaceDataset(), num_workers=4, multiprocessing_context="fork")
        """,
        path="example.ipynb",
    ),
    # Linux before Python 3.14 forks by default (the examples' profile).
    Valid(
        """
        from torch.utils.data import DataLoader, Dataset
        class FaceDataset(Dataset):
            def __getitem__(self, i):
                return i
        loader = DataLoader(FaceDataset(), num_workers=4)
        """,
        path="example.ipynb",
    ),
    # A script's classes live in an importable module (LL013 is about its guard).
    Valid(
        """
        from torch.utils.data import DataLoader, Dataset
        class FaceDataset(Dataset):
            def __getitem__(self, i):
                return i
        loader = DataLoader(FaceDataset(), num_workers=4, multiprocessing_context="spawn")
        """,
    ),
    # A lambda is LL007's finding, in notebooks and scripts alike.
    Valid(
        """
        from torch.utils.data import DataLoader
        from faces import FaceDataset
        loader = DataLoader(FaceDataset(), num_workers=2, collate_fn=lambda b: b, multiprocessing_context="spawn")
        """,
        path="example.ipynb",
    ),
    # A helper that receives an imported dataset, or one whose result
    # cannot be traced (a parameter): silent.
    Valid(
        """
        from torch.utils.data import DataLoader
        from faces import FaceDataset
        def make_loader(dataset):
            return DataLoader(dataset, batch_size=8, num_workers=4, multiprocessing_context="spawn")
        def wrap(ds):
            return ds
        train = make_loader(FaceDataset())
        loader = DataLoader(wrap(source), num_workers=4, multiprocessing_context="spawn")
        """,
        path="example.ipynb",
    ),
    # Unresolved worker count: silent.
    Valid(
        """
        from torch.utils.data import DataLoader, Dataset
        class FaceDataset(Dataset):
            def __getitem__(self, i):
                return i
        loader = DataLoader(FaceDataset(), num_workers=args.workers, multiprocessing_context="spawn")
        """,
        path="example.ipynb",
    ),
]
INVALID = [
    Invalid(
        """
        from torch.utils.data import DataLoader, Dataset
        class FaceDataset(Dataset):
            def __len__(self):
                return 100
            def __getitem__(self, i):
                return i
        ds = FaceDataset()
        loader = DataLoader(ds, batch_size=8, num_workers=4)
        """,
        message="`FaceDataset` (the dataset's class) is defined in the notebook, but its 4 workers may start with "
        "spawn or forkserver (the target platform is macos, where workers are spawned) and cannot import "
        "`__main__`: the first batch fails with `AttributeError: Can't get attribute 'FaceDataset' on "
        "<module '__main__'>`; move the definitions to a `.py` module and import them, or use `num_workers=0` "
        "in the notebook",
        profile=_MACOS,
        line=8,
        path="example.ipynb",
    ),
    Invalid(
        """
        import torch
        from faces import FaceDataset
        def pad_collate(batch):
            return batch
        loader = torch.utils.data.DataLoader(
            FaceDataset(), batch_size=8, num_workers=2, collate_fn=pad_collate, multiprocessing_context="spawn"
        )
        """,
        message=None,
        line=5,
        path="example.ipynb",
    ),
    # Built by a helper of the notebook, and passed to one.
    Invalid(
        """
        from torch.utils.data import DataLoader, Dataset
        class FaceDataset(Dataset):
            def __getitem__(self, i):
                return i
        def make_dataset(root):
            return FaceDataset(root)
        def make_loader(dataset):
            return DataLoader(dataset, batch_size=8, num_workers=4, multiprocessing_context="spawn")
        train = make_dataset("train")
        loader = DataLoader(train, num_workers=4, multiprocessing_context="spawn")
        val = make_loader(FaceDataset("val"))
        """,
        count=2,
        path="example.ipynb",
    ),
    # Inside the dataset: a transform class of the notebook.
    Invalid(
        """
        from torch.utils.data import DataLoader
        from torchvision import datasets, transforms
        class AddNoise:
            def __call__(self, x):
                return x
        tf = transforms.Compose([transforms.ToTensor(), AddNoise()])
        train = datasets.MNIST("data", train=True, transform=tf)
        loader = DataLoader(train, batch_size=64, num_workers=2, multiprocessing_context="forkserver")
        """,
        line=8,
        path="example.ipynb",
    ),
    # A worker_init_fn through functools.partial, and no declared platform.
    Invalid(
        """
        import functools
        from torch.utils.data import DataLoader
        from faces import FaceDataset
        def seed_worker(worker_id, base):
            pass
        loader = DataLoader(FaceDataset(), num_workers=2, worker_init_fn=functools.partial(seed_worker, base=0))
        """,
        profile=HardwareProfile(usable_cpus=4, gpu_count=0),
        path="example.ipynb",
    ),
    # Through Subset, with set_start_method("spawn").
    Invalid(
        """
        import torch.multiprocessing as mp
        from torch.utils.data import DataLoader, Dataset, Subset
        mp.set_start_method("spawn", force=True)
        class FaceDataset(Dataset):
            def __getitem__(self, i):
                return i
        loader = DataLoader(Subset(FaceDataset(), range(10)), num_workers=2)
        """,
        path="example.ipynb",
    ),
]
