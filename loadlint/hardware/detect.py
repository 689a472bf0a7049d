"""Hardware profiles: what the rules assume about the machine that trains.

Three sources feed a :class:`~loadlint.types.HardwareProfile`:

* :func:`detect` probes this machine (CPUs, affinity, cgroup quota, memory,
  ``/dev/shm``, NVIDIA GPUs through NVML). It never raises: a probe that
  fails leaves its field ``None``.
* :func:`parse_target` (``--target cpus=64,gpus=8``) and
  :func:`validate_target` (``[tool.loadlint.target]``) read a declared
  target into a :class:`~loadlint.types.Target`, because the machine that
  runs the linter is rarely the one that trains.
* :func:`resolve_profile` merges the two: declared keys win, detection
  fills the rest.

:func:`suggest_num_workers` is the single place that turns a profile into a
``num_workers`` suggestion (the formula of :mod:`loadlint.hardware.workers`
with the target's caps); every rule and the ``hardware`` command use it.
:func:`rules_profile` is the profile the rules judge against: the declared
target alone, never this machine unless the target is ``detect``.

psutil and pynvml are imported inside the probes, never at module import:
``loadlint check`` on a declared target must not pay for them.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
import re
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, Mapping

from loadlint.hardware import cpus
from loadlint.hardware.workers import SMALL_MACHINE_CPUS, run_time_cpus, workers_for
from loadlint.types import GPU, HardwareProfile, Target

__all__ = [
    "GIB",
    "TARGET_KEYS",
    "WORKER_MEMORY_BYTES",
    "Probes",
    "SMALL_MACHINE_CPUS",
    "TargetError",
    "DETECT",
    "detect",
    "detected_target",
    "parse_target",
    "ranks_per_node",
    "resolve_profile",
    "rules_profile",
    "suggest_num_workers",
    "validate_target",
]

GIB = 1024**3

#: Host RAM assumed per DataLoader worker when capping the suggestion.
#: Each worker is a copy of the training process; copy-on-write pages
#: fault in as soon as Python touches their refcounts, and the worker holds
#: ``prefetch_factor`` decoded batches. 1 GiB is a middle-of-the-road figure
#: for image/text pipelines; the cap only bites on small-memory machines.
WORKER_MEMORY_BYTES = 1 * GIB

#: Keys accepted by ``--target`` and ``[tool.loadlint.target]``, in the
#: order error messages list them (``Target``'s fields).
TARGET_KEYS = tuple(f.name for f in fields(Target))

# Keys that detection can supply; torch is not among them (loadlint never
# imports torch, and the linting environment's torch says little about the
# training one), so an undeclared torch keeps the profile's default.
_DETECTABLE_KEYS = frozenset({"cpus", "gpus", "memory", "shm", "platform", "python"})


# --------------------------------------------------------------------------
# Detection
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Probes:
    """The non-filesystem sources :func:`detect` reads; replace any in tests.

    ``import_module`` loads ``psutil`` and ``pynvml``, so a test can hand in
    fake modules or raise ``ImportError``.
    """

    cpu_count: Callable[[], int | None] = os.cpu_count
    affinity: Callable[[], int | None] = cpus.affinity
    import_module: Callable[[str], Any] = importlib.import_module
    platform: str = sys.platform
    python: tuple[int, int] = (sys.version_info[0], sys.version_info[1])


def detect(
    root: str | os.PathLike[str] = "/",
    *,
    nvml: bool = True,
    probes: Probes | None = None,
) -> HardwareProfile:
    """Probe this machine and return its profile. Never raises.

    :param root: where ``/proc``, ``/sys`` and ``/dev/shm`` are looked up;
        tests point it at a fake tree.
    :param nvml: probe GPUs through NVML. ``False`` leaves ``gpu_count``
        ``None`` (used when a target declares ``gpus``: NVML initialisation
        is the slowest probe).
    :param probes: replacements for the CPU, import and platform probes.

    A machine where NVML cannot be loaded or initialised (no ``pynvml``, no
    driver) reports ``gpu_count=0``: without a driver there is no usable
    NVIDIA GPU. ``gpu_count`` is ``None`` only when NVML started but could
    not count devices, or when ``nvml`` is ``False``.
    """
    probes = probes or Probes()
    base = Path(root)

    logical = _safe(lambda: _positive(probes.cpu_count()))
    affinity = _safe(lambda: _positive(probes.affinity()))
    cgroup = _safe(lambda: cpus.cgroup_cpu_quota(base))
    psutil = _safe(lambda: probes.import_module("psutil"))
    physical = _safe(lambda: _positive(psutil.cpu_count(logical=False))) if psutil else None
    memory = _safe(lambda: psutil.virtual_memory()) if psutil else None
    memory_total = _safe(lambda: int(memory.total)) if memory is not None else None
    memory_available = _safe(lambda: int(memory.available)) if memory is not None else None
    shm = _safe(lambda: _shm_bytes(base))
    gpus: tuple[GPU, ...] = ()
    gpu_count: int | None = None
    if nvml and probes.platform.startswith("linux") and not _nvidia_driver(base):
        # No kernel driver, no usable GPU: what NVML would say, without the
        # cost of failing to load it on every run.
        gpu_count = 0
    elif nvml:
        gpu_count, gpus = _nvml_gpus(probes.import_module)

    return HardwareProfile(
        usable_cpus=cpus.usable_cpus(logical, affinity, cgroup),
        logical_cpus=logical,
        physical_cores=physical,
        affinity_cpus=affinity,
        cgroup_cpus=cgroup,
        memory_total=memory_total,
        memory_available=memory_available,
        shm_bytes=shm,
        gpus=gpus,
        gpu_count=gpu_count,
        platform=_platform_name(probes.platform),
        python=f"{probes.python[0]}.{probes.python[1]}",
    )


def _safe(probe: Callable[[], Any]) -> Any:
    # One failing probe (permission denied, odd /proc, broken psutil) must
    # not cost the whole profile: it just leaves its field unknown.
    try:
        return probe()
    except Exception:
        return None


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and value > 0 else None


def _platform_name(platform: str) -> str:
    if platform == "darwin":
        return "macos"
    if platform in ("win32", "cygwin"):
        return "windows"
    # Other POSIX systems (Linux, the BSDs) default to fork, which is what
    # the platform-dependent rules care about.
    return "linux"


def _shm_bytes(root: Path) -> int | None:
    shm = root / "dev" / "shm"
    # os.statvfs is POSIX-only; Windows has no /dev/shm either way.
    if not hasattr(os, "statvfs") or not shm.is_dir():
        return None
    stat = os.statvfs(shm)
    return stat.f_blocks * stat.f_frsize


def _nvidia_driver(root: Path) -> bool:
    """Whether NVIDIA's kernel driver is loaded (it publishes these; a
    container given GPUs sees them too)."""
    return any(os.path.exists(root / part) for part in ("proc/driver/nvidia", "dev/nvidiactl"))


def _nvml_gpus(import_module: Callable[[str], Any]) -> tuple[int | None, tuple[GPU, ...]]:
    try:
        pynvml = import_module("pynvml")
        pynvml.nvmlInit()
    except Exception:
        # No library, no driver, or a driver that will not start: no GPU
        # the training job could use.
        return 0, ()
    try:
        count = int(pynvml.nvmlDeviceGetCount())
    except Exception:
        count = None
    gpus: list[GPU] = []
    for index in range(count or 0):
        gpus.append(_nvml_device(pynvml, index))
    try:
        pynvml.nvmlShutdown()
    except Exception:
        pass
    return count, tuple(gpus)


def _nvml_device(pynvml: Any, index: int) -> GPU:
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:
        return GPU(name="unknown")
    name = _safe(lambda: pynvml.nvmlDeviceGetName(handle))
    if isinstance(name, bytes):  # nvidia-ml-py < 11.5 returns bytes
        name = name.decode("utf-8", "replace")
    memory = _safe(lambda: int(pynvml.nvmlDeviceGetMemoryInfo(handle).total))
    return GPU(name=name if isinstance(name, str) and name else "unknown", memory_bytes=memory)


# cgroups ------------------------------------------------------------------


# --------------------------------------------------------------------------
# Targets
# --------------------------------------------------------------------------


class TargetError(ValueError):
    """A target key or value that cannot be used; ``str()`` is one line."""


_SIZE_HELP = "GiB as a number (512) or a size with a unit (512M, 2G, 1.5T, 64MiB)"
_EXPECTED = {
    "cpus": "a positive integer, e.g. 64",
    "gpus": "a non-negative integer, e.g. 8",
    "memory": _SIZE_HELP,
    "shm": _SIZE_HELP,
    "platform": "one of linux, macos, windows",
    "python": "a version such as 3.12",
    "torch": "a version such as 2, 2.4 or 1.13",
}
_PLATFORMS = {
    "linux": "linux",
    "macos": "macos",
    "darwin": "macos",
    "windows": "windows",
    "win32": "windows",
}
# Units are binary, as docker's --memory/--shm-size read them: 2G = 2 GiB.
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4, "p": 1024**5}
_SIZE_RE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([kmgtp]?)(i?b)?", re.IGNORECASE)
_INT_RE = re.compile(r"\d+")
#: The largest counts and sizes a target may declare: beyond any machine,
#: and small enough that no arithmetic on them overflows a float.
MAX_TARGET_COUNT = 1 << 20
MAX_TARGET_BYTES = 1 << 60
_PYTHON_RE = re.compile(r"(\d+)\.(\d+)(?:\.\d+)?")
_TORCH_RE = re.compile(r"(\d+)(?:\.(\d+))?(?:\.\d+)?(?:\+[\w.]+)?")


#: The target spec (``--target detect``, ``target = "detect"``) that
#: declares this machine: judging against it is then visible in the
#: command or the configuration, never implied.
DETECT = "detect"


def detected_target(detector: Callable[[], HardwareProfile] | None = None) -> Target:
    """This machine as a target: what ``init`` writes without ``--target``
    and what ``detect`` declares."""
    profile = (detector or detect)()
    return Target(
        cpus=profile.usable_cpus, gpus=profile.gpu_count or 0, memory=profile.memory_total or None,
        shm=profile.shm_bytes or None, platform=profile.platform, python=profile.python,
    )


def parse_target(spec: str, source: str = "--target", detector: Callable[[], HardwareProfile] | None = None) -> Target:
    """Parse the command-line form ``cpus=64,gpus=8,memory=512,...``.

    ``detect`` among the items declares this machine (:func:`detected_target`);
    the pairs beside it override its keys (``detect,gpus=8``).

    Returns the target as :func:`validate_target` does: ``cpus`` and
    ``gpus`` as ints, ``memory`` and ``shm`` in bytes, ``platform`` one of
    linux/macos/windows, ``python`` and ``torch`` as version strings.

    :raises TargetError: on an unknown key, a bad value, a repeated key or
        a malformed pair.
    """
    table: dict[str, str] = {}
    here = False
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue  # tolerate "cpus=64," and doubled commas
        if item.lower() == DETECT:
            here = True
            continue
        key, sep, value = item.partition("=")
        key, value = key.strip().lower(), value.strip()
        if not sep or not key:
            raise TargetError(f"{source}: expected key=value, got {item!r} (e.g. cpus=64,gpus=8)")
        if key in table:
            raise TargetError(f"{source}: key {key!r} given twice")
        table[key] = value
    if not table and not here:
        raise TargetError(f"{source}: empty target (expected key=value pairs, e.g. cpus=64,gpus=8, or detect)")
    declared = validate_target(table, source)
    return declared.over(detected_target(detector)) if here else declared


def validate_target(table: Mapping[str, Any], source: str) -> Target:
    """Validate a ``[tool.loadlint.target]`` table (or parsed CLI pairs).

    Accepts TOML values: ints for ``cpus``/``gpus``; a number of GiB or a
    size string for ``memory``/``shm``; strings for the rest (``torch`` may
    also be an int such as ``2``). ``darwin`` and ``win32`` are accepted as
    aliases of ``macos`` and ``windows``.

    :param source: names the origin in error messages, e.g. ``--target`` or
        ``pyproject.toml [tool.loadlint.target]``.
    :raises TargetError: with a one-line message naming the source, the key
        and what is allowed.
    """
    if not isinstance(table, Mapping):
        kind = type(table).__name__
        raise TargetError(f"{source}: expected a table of key = value pairs, got {kind}")
    result: dict[str, Any] = {}
    for key, value in table.items():
        if key not in _EXPECTED:
            raise TargetError(f"{source}: unknown key {key!r} (allowed: {', '.join(TARGET_KEYS)})")
        parsed = _PARSERS[key](value)
        if parsed is None:
            hint = ""
            if key in ("python", "torch") and isinstance(value, float):
                hint = "; quote it, a TOML number drops trailing zeros (3.10 reads as 3.1)"
            elif key in ("cpus", "gpus") and (
                isinstance(value, int) and value > MAX_TARGET_COUNT
                or isinstance(value, str) and value.strip().isdigit() and len(value.strip()) > 7
            ):
                hint = f"; at most {MAX_TARGET_COUNT}"
            expected = _EXPECTED[key] + hint
            raise TargetError(f"{source}: invalid {key} {value!r} (expected {expected})")
        result[key] = parsed
    return Target(**result)


def _parse_count(value: Any, minimum: int) -> int | None:
    # bool is an int subclass; `cpus = true` is a mistake, not 1 CPU.
    if isinstance(value, bool):
        return None
    # Length first: int() refuses a string beyond Python's digit limit.
    if isinstance(value, str) and len(value.strip()) <= 20 and _INT_RE.fullmatch(value.strip()):
        value = int(value.strip())
    return value if isinstance(value, int) and minimum <= value <= MAX_TARGET_COUNT else None


def _parse_size(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number, multiplier = float(value), GIB
    elif isinstance(value, str):
        match = _SIZE_RE.fullmatch(value.strip())
        if not match:
            return None
        digits, prefix, suffix = match.groups()
        if suffix and suffix.lower() == "ib" and not prefix:
            return None  # "64iB" is neither a unit nor a typo we can read
        number = float(digits)
        # A bare number is GiB (the documented short form); "B" alone is bytes.
        multiplier = GIB if not prefix and not suffix else _UNITS[prefix.lower()]
    else:
        return None
    if not math.isfinite(number) or number <= 0 or number * multiplier > MAX_TARGET_BYTES:
        return None
    size = int(round(number * multiplier))
    return size if size > 0 else None


def _parse_platform(value: Any) -> str | None:
    return _PLATFORMS.get(value.strip().lower()) if isinstance(value, str) else None


def _parse_python(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    if len(value) > 40:  # int() refuses a string beyond Python's digit limit
        return None
    match = _PYTHON_RE.fullmatch(value.strip())
    if not match or int(match[1]) < 3:
        return None
    return f"{int(match[1])}.{int(match[2])}"


def _parse_torch(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return str(value)
    if not isinstance(value, str):
        return None
    if len(value) > 80:  # int() refuses a string beyond Python's digit limit
        return None
    match = _TORCH_RE.fullmatch(value.strip())
    if not match or int(match[1]) < 1:
        return None
    major = str(int(match[1]))
    return major if match[2] is None else f"{major}.{int(match[2])}"


_PARSERS: dict[str, Callable[[Any], Any]] = {
    "cpus": lambda v: _parse_count(v, 1),
    "gpus": lambda v: _parse_count(v, 0),
    "memory": _parse_size,
    "shm": _parse_size,
    "platform": _parse_platform,
    "python": _parse_python,
    "torch": _parse_torch,
}


# --------------------------------------------------------------------------
# Resolution and suggestions
# --------------------------------------------------------------------------


def resolve_profile(
    target: Target | None = None,
    detector: Callable[..., HardwareProfile] = detect,
) -> HardwareProfile:
    """Merge a validated target over detection.

    :param target: as returned by :func:`parse_target` or
        :func:`validate_target` (merge CLI over config before calling).
    :param detector: called as ``detector(nvml=...)`` only when the target
        leaves a detectable key open; ``nvml`` is ``False`` when ``gpus`` is
        declared, since NVML start-up is the slow probe.

    A declared ``cpus`` replaces every CPU field (the detected physical
    cores of this machine say nothing about the declared one), and
    ``usable_cpus`` becomes that number. ``declared`` lists the target's keys.
    """
    target = target or Target()
    declared = target.declared
    if _DETECTABLE_KEYS <= declared and target.cpus is not None:
        profile = HardwareProfile(usable_cpus=target.cpus)
    else:
        profile = detector(nvml="gpus" not in declared)

    changes: dict[str, Any] = {"declared": declared}
    if target.cpus is not None:
        cpus = target.cpus
        changes.update(
            usable_cpus=cpus,
            logical_cpus=cpus,
            physical_cores=None,
            affinity_cpus=None,
            cgroup_cpus=None,
        )
    if target.gpus is not None:
        changes.update(gpu_count=target.gpus, gpus=())
    if target.memory is not None:
        changes.update(memory_total=target.memory, memory_available=None)
    if target.shm is not None:
        changes["shm_bytes"] = target.shm
    for key in ("platform", "python", "torch"):
        if getattr(target, key) is not None:
            changes[key] = getattr(target, key)
    return dataclasses.replace(profile, **changes)


def rules_profile(target: Target | None = None) -> HardwareProfile:
    """The profile the rules judge against: the declared target and nothing
    of this machine (an undeclared key stays unknown), so that findings and
    fixes depend only on the code and the configuration.  Without a declared
    CPU count it carries ``here_cpus`` for the messages' hint.  ``detect``
    (:func:`parse_target`) is how a project judges against this machine."""
    profile = resolve_profile(target, detector=lambda **_: HardwareProfile(usable_cpus=1, gpu_count=None))
    if "cpus" in profile.declared:
        return profile
    return dataclasses.replace(profile, here_cpus=run_time_cpus())


def ranks_per_node(profile: HardwareProfile, distributed: bool) -> int:
    """Processes that share one node: one per GPU under DDP, else one.

    A distributed module on a profile without GPUs (or with an unknown
    count) still runs at least one rank.
    """
    return max(1, profile.gpu_count or 0) if distributed else 1


def suggest_num_workers(
    profile: HardwareProfile,
    ranks_per_node: int = 1,
    batch_size: int | None = None,
    share: int = 1,
) -> int:
    """The suggested ``num_workers`` for each rank's DataLoader.

    Start from :func:`~loadlint.hardware.workers.workers_for`: the CPUs
    each rank can use, one kept for the rank's own process
    (``max(1, usable_cpus // ranks_per_node - 1)``, Lightning's
    ``suggested_max_num_workers``, below torch's
    ``check_worker_number_rationality`` warning), except on a node of at
    most :data:`SMALL_MACHINE_CPUS` CPUs, where every CPU gets a worker.
    Then cap it, each cap only when its input is known:

    * by the physical cores per rank: beyond them, workers share cores
      through hyperthreads and decoding throughput stops growing;
    * by ``batch_size``: the seed rule of thumb; small batches are cheap to
      assemble, so a few workers keep up;
    * by memory: ``memory_total // (WORKER_MEMORY_BYTES * ranks_per_node)``,
      since every worker is a copy of the training process.

    ``share`` loaders whose workers are alive at the same time divide the
    count and both caps among them.

    Never below 1: the rules suggest asynchronous loading, and one worker
    is always better than loading on the training thread.
    """
    ranks = max(1, ranks_per_node)
    share = max(1, share)
    workers = workers_for(profile.usable_cpus, ranks, share)
    if profile.physical_cores:
        workers = min(workers, max(1, profile.physical_cores // (ranks * share)))
    if batch_size is not None and batch_size >= 1:
        workers = min(workers, batch_size)
    # This machine's memory says nothing about a declared training box.
    mixed = "cpus" in profile.declared and "memory" not in profile.declared
    if profile.memory_total and not mixed:
        workers = min(workers, max(1, profile.memory_total // (WORKER_MEMORY_BYTES * ranks * share)))
    return max(1, workers)
