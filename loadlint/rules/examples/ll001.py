"""LL001 (prefetch-without-workers): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid
from loadlint.types import HardwareProfile

_TORCH1 = HardwareProfile(
    usable_cpus=2,
    gpu_count=0,
    torch="1.13",
    declared=frozenset({"cpus", "gpus", "platform", "python", "torch"}),
)


VALID = [
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=2, prefetch_factor=4)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, prefetch_factor=None)
    """),
    # Unresolvable values stay silent.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=args.workers, prefetch_factor=4)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        def build(ds, pf):
            return DataLoader(ds, prefetch_factor=pf)
    """),
    # torch 1.x: 2 was the default and is accepted.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, prefetch_factor=2)
    """, profile=_TORCH1),
]
INVALID = [
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=0, prefetch_factor=4)
        """,
        message="`prefetch_factor=4` with `num_workers=0` raises ValueError at construction: prefetching needs "
        "worker processes; remove `prefetch_factor` or start workers",
        fixed="""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=0)
        """,
        line=2,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        PREFETCH = 2
        loader = DataLoader(
            ds,
            batch_size=4,
            prefetch_factor=PREFETCH,
        )
        """,
        message="`prefetch_factor=PREFETCH` without `num_workers` raises ValueError at construction: prefetching "
        "needs worker processes; remove `prefetch_factor` or start workers",
        fixed="""
        from torch.utils.data import DataLoader
        PREFETCH = 2
        loader = DataLoader(
            ds,
            batch_size=4,
        )
        """,
    ),
    # torch 1.x: None was not the default, and 0 workers required exactly 2.
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, prefetch_factor=None)
        """,
        message="`prefetch_factor=None` without `num_workers` raises ValueError at construction on torch 1.13: "
        "prefetching needs worker processes; remove `prefetch_factor` or start workers",
        fixed="""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4)
        """,
        profile=_TORCH1,
    ),
    # A value carried by a resolved **dict is reported but not edited.
    Invalid(
        """
        from torch.utils.data import DataLoader
        def build(ds):
            kwargs = {"batch_size": 4, "prefetch_factor": 4}
            return DataLoader(ds, **kwargs)
        """,
    ),
]
