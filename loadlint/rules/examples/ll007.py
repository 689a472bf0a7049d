"""LL007 (unpicklable-worker-function): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid
from loadlint.types import HardwareProfile

_PORTABLE = HardwareProfile(usable_cpus=2, gpu_count=0, declared=frozenset({"cpus", "gpus"}))
_MACOS = HardwareProfile(
    usable_cpus=2, gpu_count=0, platform="macos", declared=frozenset({"cpus", "gpus", "platform", "python"})
)

_PY314 = HardwareProfile(
    usable_cpus=2, gpu_count=0, python="3.14", declared=frozenset({"cpus", "gpus", "platform", "python"})
)


VALID = [
    Valid("""
        from torch.utils.data import DataLoader
        def collate(batch):
            return batch
        def build(ds):
            return DataLoader(ds, batch_size=4, num_workers=2, collate_fn=collate)
    """, profile=_PORTABLE),
    # fork pickles nothing.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, collate_fn=lambda b: b, multiprocessing_context="fork")
    """, profile=_MACOS),
    # A declared Linux target before Python 3.14 forks.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=2, collate_fn=lambda b: b)
    """),
    # No workers: nothing is pickled.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, collate_fn=lambda b: b)
    """, profile=_PORTABLE),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=args.workers, collate_fn=lambda b: b)
    """, profile=_PORTABLE),
    # A parameter is not a nested function.
    Valid("""
        from torch.utils.data import DataLoader
        def build(ds, collate_fn):
            return DataLoader(ds, num_workers=2, collate_fn=collate_fn)
    """, profile=_PORTABLE),
    # A factory returning a module-level function, or one that cannot be
    # followed to a single answer (one branch is picklable): silent.
    Valid("""
        from torch.utils.data import DataLoader
        def collate(batch):
            return batch
        def pick(flag):
            if flag:
                return lambda b: b
            return collate
        def make():
            return collate
        a = DataLoader(ds, num_workers=2, collate_fn=make(), multiprocessing_context="spawn")
        b = DataLoader(ds, num_workers=2, collate_fn=pick(True), multiprocessing_context="spawn")
        c = DataLoader(ds, num_workers=2, collate_fn=factories.make(), multiprocessing_context="spawn")
    """),
    Valid("""
        import functools
        from torch.utils.data import DataLoader
        def collate(batch, pad):
            return batch
        def build(ds):
            return DataLoader(ds, num_workers=2, collate_fn=functools.partial(collate, pad=0))
    """, profile=_MACOS),
    Valid("""
        from torch.utils.data import DataLoader
        from torchvision import transforms
        def main():
            ds = Images(transform=transforms.Compose([transforms.ToTensor()]))
            return DataLoader(ds, num_workers=2)
    """, profile=_PORTABLE),
]
INVALID = [
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=1, collate_fn=lambda b: b, multiprocessing_context="spawn")
        """,
        message="`collate_fn` is a lambda: workers started with spawn or forkserver cannot pickle it, so the first "
        "batch fails (`multiprocessing_context=\"spawn\"`); define it at module level",
        fixed="""
        from torch.utils.data import DataLoader
        def _collate_fn(b):
            return b


        loader = DataLoader(ds, batch_size=4, num_workers=1, collate_fn=_collate_fn, multiprocessing_context="spawn")
        """,
        line=2,
    ),
    # Through a factory of this module.
    Invalid(
        """
        from torch.utils.data import DataLoader
        def make_collate(pad):
            def collate(batch):
                return pad_batch(batch, pad)
            return collate
        collate_fn = make_collate(0)
        loader = DataLoader(ds, num_workers=2, collate_fn=collate_fn, multiprocessing_context="spawn")
        """,
        message="`collate_fn` is what `make_collate()` returns, which is a function defined inside "
        "`make_collate()`: workers started with spawn or forkserver cannot pickle it, so the first batch fails "
        "(`multiprocessing_context=\"spawn\"`); make `make_collate()` return a module-level function "
        "(`functools.partial` can carry its settings)",
        line=7,
    ),
    # A nested function through a variable: moved to module level.
    Invalid(
        """
        from torch.utils.data import DataLoader
        def build(ds):
            def seed(worker_id):
                pass
            init = seed
            return DataLoader(ds, num_workers=2, worker_init_fn=init, multiprocessing_context="spawn")
        """,
        fixed="""
        from torch.utils.data import DataLoader
        def seed(worker_id):
            pass


        def build(ds):
            init = seed
            return DataLoader(ds, num_workers=2, worker_init_fn=init, multiprocessing_context="spawn")
        """,
    ),
    Invalid(
        """
        import torch
        from torch.utils.data import DataLoader


        def main():
            def seed_worker(worker_id):
                torch.manual_seed(worker_id)

            return DataLoader(ds, batch_size=4, num_workers=1, worker_init_fn=seed_worker)


        loader = main()
        """,
        message="`worker_init_fn` is a function defined inside `main()`: workers started with spawn or forkserver "
        "cannot pickle it, so the first batch fails (no target platform is declared, and macOS and Windows spawn "
        "workers); define it at module level",
        fixed="""
        import torch
        from torch.utils.data import DataLoader


        def seed_worker(worker_id):
            torch.manual_seed(worker_id)


        def main():

            return DataLoader(ds, batch_size=4, num_workers=1, worker_init_fn=seed_worker)


        loader = main()
        """,
        profile=_PORTABLE,
    ),
    # It reads a local name: moving it would break it, so no fix.
    Invalid(
        """
        from torch.utils.data import DataLoader
        def main(pad):
            def collate(batch):
                return batch + [pad]
            return DataLoader(ds, num_workers=2, collate_fn=collate)
        """,
        profile=_MACOS,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        def main():
            class Collate:
                def __call__(self, batch):
                    return batch
            return DataLoader(ds, batch_size=4, num_workers=2, collate_fn=Collate())
        loader = main()
        """,
        message="`collate_fn` is an instance of `Collate`, a class defined inside a function: workers started "
        "with spawn or forkserver cannot pickle it, so the first batch fails (the target platform is macos, "
        "where workers are spawned); define it at module level",
        profile=_MACOS,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        from torchvision import datasets, transforms
        def main():
            tf = transforms.Compose([transforms.ToTensor(), transforms.Lambda(lambda x: x * 2)])
            train = datasets.MNIST("data", transform=tf)
            return DataLoader(train, batch_size=64, num_workers=4)
        """,
        message="the dataset is built with `tf`, which holds a lambda: workers started with spawn or forkserver "
        "cannot pickle it, so the first batch fails (Python 3.14 on Linux starts workers with forkserver); build "
        "it from module-level functions",
        profile=_PY314,
    ),
    Invalid(
        """
        import torch.multiprocessing as mp
        from torch.utils.data import DataLoader
        mp.set_start_method("spawn")
        loader = DataLoader(ds, batch_size=4, num_workers=2, worker_init_fn=lambda i: None)
        """,
        fixed="""
        import torch.multiprocessing as mp
        from torch.utils.data import DataLoader
        mp.set_start_method("spawn")
        def _worker_init_fn(i):
            return None


        loader = DataLoader(ds, batch_size=4, num_workers=2, worker_init_fn=_worker_init_fn)
        """,
    ),
]
