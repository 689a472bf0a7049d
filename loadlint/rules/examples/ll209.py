"""LL209 (shared-memory-too-small): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid
from loadlint.types import HardwareProfile
from loadlint.rules.ll209_shared_memory_too_small import GIB

_DOCKER = HardwareProfile(
    usable_cpus=8, gpu_count=1, shm_bytes=64 * 1024**2,
    declared=frozenset({"cpus", "gpus", "platform", "python", "shm"}),
)
_ROOMY = HardwareProfile(
    usable_cpus=8, gpu_count=1, shm_bytes=16 * GIB, declared=frozenset({"cpus", "gpus", "platform", "python", "shm"}),
)


VALID = [
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=64, num_workers=4)
    """, profile=_ROOMY),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=64, num_workers=0)
    """, profile=_DOCKER),
    # Unknown size: silent.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=64, num_workers=4)
    """),
    # /dev/shm not declared: a small one here says nothing about the training machine.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4)
    """, profile=HardwareProfile(usable_cpus=8, shm_bytes=64 * 1024**2, declared=frozenset({"cpus"}))),
]
INVALID = [
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=64, num_workers=4)
        """,
        message="`num_workers=4` with 64 MiB of /dev/shm (declared): workers pass batches through shared memory "
        "and die with \"Bus error\" when it fills; raise it with `docker run --shm-size=16g` or `--ipc=host`",
        profile=_DOCKER,
        line=2,
    ),
]
