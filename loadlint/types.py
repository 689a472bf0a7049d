"""Plain data shared by every layer: findings, fixes, hardware profiles.

A leaf module: it imports nothing from loadlint, so any layer may import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Applicability = Literal["safe", "unsafe"]


@dataclass(frozen=True, order=True)
class Location:
    """1-based row and 1-based column (end columns are exclusive)."""

    row: int
    column: int


@dataclass(frozen=True)
class Edit:
    """Replace ``source[start:end]`` (character offsets) with ``content``."""

    content: str
    start: int
    end: int
    location: Location
    end_location: Location


@dataclass(frozen=True)
class Fix:
    applicability: Applicability
    message: str
    edits: tuple[Edit, ...]


@dataclass
class Finding:
    code: str
    name: str
    message: str
    path: str
    location: Location
    end_location: Location
    fix: Fix | None = None
    #: 1-based notebook cell index; None for plain Python files.
    cell: int | None = None

    @property
    def fixable(self) -> bool:
        return self.fix is not None


@dataclass(frozen=True)
class GPU:
    name: str
    memory_bytes: int | None = None


@dataclass(frozen=True)
class HardwareProfile:
    """The machine the rules reason about: detected, declared, or a mix.

    ``declared`` names the keys a target set explicitly; rules that must
    give the portable answer when a key is not declared (the start method
    depends on platform and python) look there.
    """

    usable_cpus: int
    logical_cpus: int | None = None
    physical_cores: int | None = None
    affinity_cpus: int | None = None
    cgroup_cpus: float | None = None
    memory_total: int | None = None
    memory_available: int | None = None
    shm_bytes: int | None = None
    gpus: tuple[GPU, ...] = ()
    #: 0 without an NVIDIA driver; None when NVML loads but cannot count.
    gpu_count: int | None = None
    platform: str = "linux"
    python: str = "3.11"
    torch: str = "2"
    declared: frozenset[str] = field(default_factory=frozenset)

    @property
    def label(self) -> str:
        """Short description used in messages that depend on hardware."""
        gpus = "? GPUs" if self.gpu_count is None else _count(self.gpu_count, "GPU")
        declared = {"cpus", "gpus"} & self.declared
        origin = "target" if declared == {"cpus", "gpus"} else "target+detected" if declared else "detected"
        return f"{origin}: {_count(self.usable_cpus, 'CPU')}, {gpus}"


def _count(n: int, unit: str) -> str:
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"
