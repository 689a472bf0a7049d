"""LL208 (pin-memory-without-accelerator): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid
from loadlint.types import HardwareProfile

_GPU = HardwareProfile(usable_cpus=8, gpu_count=1, declared=frozenset({"cpus", "gpus", "platform", "python"}))
_DETECTED = HardwareProfile(usable_cpus=8, gpu_count=0, declared=frozenset())


VALID = [
    Valid("""
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda")
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        for x in loader:
            x = x.to(device, non_blocking=True)
    """, profile=_GPU),
    # No evidence either way, and the target has a GPU.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
    """, profile=_GPU),
    # A CPU fallback next to CUDA is not CPU-only code.
    Valid("""
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
    """, profile=_DETECTED),
    Valid("""
        import torch
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=torch.cuda.is_available())
    """),
]
INVALID = [
    Invalid(
        """
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cpu")
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        for x in loader:
            x = x.to(device)
        """,
        message="`pin_memory=True` but the code only uses the CPU: torch warns and pins nothing; use "
        "`pin_memory=torch.cuda.is_available()`",
        fixed="""
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cpu")
        loader = DataLoader(ds, num_workers=2, pin_memory=torch.cuda.is_available())
        for x in loader:
            x = x.to(device)
        """,
        profile=_GPU,
        line=4,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        """,
        message="`pin_memory=True` but the target has no GPU (target: 2 CPUs, 0 GPUs): torch warns and pins "
        "nothing; use `pin_memory=torch.cuda.is_available()`",
        fixed="""
        from torch.utils.data import DataLoader
        import torch
        loader = DataLoader(ds, num_workers=2, pin_memory=torch.cuda.is_available())
        """,
    ),
    # Carried by a dict: the finding stands, with no fix to edit it.
    Invalid(
        """
        from torch.utils.data import DataLoader
        def build(ds):
            options = {"num_workers": 2, "pin_memory": True}
            return DataLoader(ds, **options)
        """,
        message="`pin_memory=True` but the target has no GPU (target: 2 CPUs, 0 GPUs): torch warns and pins "
        "nothing; use `pin_memory=torch.cuda.is_available()`",
    ),
]
