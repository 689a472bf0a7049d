"""LL009 (invalid-multiprocessing-context): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid
from loadlint.types import HardwareProfile

_WINDOWS = HardwareProfile(
    usable_cpus=2, gpu_count=0, platform="windows", declared=frozenset({"cpus", "gpus", "platform", "python"})
)


VALID = [
    Valid("""
        from torch.utils.data import DataLoader
        def build(ds):
            return DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context="spawn")
    """),
    Valid("""
        import multiprocessing as mp
        from torch.utils.data import DataLoader
        def build(ds):
            return DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context=mp.get_context("forkserver"))
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, multiprocessing_context=None)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=args.workers, multiprocessing_context="spawn")
    """),
    # fork exists on the default (Linux) target.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context="fork")
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context="spawn")
    """, profile=_WINDOWS),
]
INVALID = [
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, multiprocessing_context="spawn")
        """,
        message="`multiprocessing_context=\"spawn\"` without `num_workers` raises ValueError at construction: "
        "a start method only applies to worker processes; remove it or start workers",
        fixed="""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4)
        """,
        line=2,
    ),
    Invalid(
        """
        import torch.multiprocessing as mp
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=0, multiprocessing_context=mp.get_context("spawn"))
        """,
        fixed="""
        import torch.multiprocessing as mp
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=0)
        """,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context="threads")
        """,
        message="`multiprocessing_context=\"threads\"` raises ValueError at construction: it is not a start "
        "method; use \"spawn\", \"forkserver\" or \"fork\"",
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context=3)
        """,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context="fork")
        """,
        message="`multiprocessing_context=\"fork\"` raises ValueError at construction on Windows, which only "
        "has \"spawn\"; use \"spawn\" (target: 2 CPUs, 0 GPUs)",
        profile=_WINDOWS,
    ),
]
