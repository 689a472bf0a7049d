"""How many CPUs this process may use: logical CPUs, affinity and the
cgroup quota.  One probe shared by the hardware profile, the runner's pool
size and verify (whose child process imports it too, so it stays free of
anything heavier than the standard library).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Callable

__all__ = ["affinity", "affinity_set", "cgroup_cpu_quota", "usable_cpus", "usable_here"]


def affinity_set() -> list[int]:
    """The CPUs this process may run on (all of them where affinity is unknown)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def affinity() -> int | None:
    # sched_getaffinity exists on Linux only; elsewhere affinity is unknown.
    getaffinity = getattr(os, "sched_getaffinity", None)
    return None if getaffinity is None else len(getaffinity(0))


def usable_cpus(logical: int | None, affinity: int | None, cgroup: float | None) -> int:
    # Physical cores are deliberately not a bound here: worker processes run
    # on hyperthreads too, so oversubscription is about schedulable CPUs.
    # suggest_num_workers applies physical cores as a separate cap.
    known = [n for n in (logical, affinity) if n is not None]
    if cgroup is not None:
        # A quota of 2.5 CPUs sustains 2 busy processes, never fewer than 1.
        known.append(max(1, math.floor(cgroup)))
    return max(1, min(known)) if known else 1


def usable_here() -> int:
    """Usable CPUs of this process, never raising (the runner and verify)."""
    try:
        quota = cgroup_cpu_quota()
    except Exception:  # an odd /proc must not cost the answer
        quota = None
    try:
        bound = affinity()
    except OSError:
        bound = None
    return usable_cpus(os.cpu_count(), bound, quota)


def cgroup_cpu_quota(root: Path = Path("/")) -> float | None:
    """The tightest CPU quota (in CPUs) over cgroup v1 and v2, or None.

    Both hierarchies are read because hybrid hosts mount the cpu controller
    on v1 and still expose a v2 tree. Ancestors count too: a quota set on
    the pod's parent cgroup limits every container below it.
    """
    memberships = _read_text(root / "proc/self/cgroup")
    if memberships is None:
        return None
    v2_path: str | None = None
    v1_path: str | None = None
    for line in memberships.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            v2_path = path
        elif "cpu" in controllers.split(","):
            v1_path = path
    mounts = _cgroup_mounts(root)
    quotas: list[float] = []
    if v2_path is not None:
        mount = mounts.get("cgroup2") or ("/", root / "sys/fs/cgroup")
        quotas += _walk_quota(_cgroup_dir(mount, v2_path), mount[1], _read_cpu_max)
    if v1_path is not None:
        v1_mount = mounts.get("cpu") or _default_v1_cpu_mount(root)
        if v1_mount is not None:
            quotas += _walk_quota(_cgroup_dir(v1_mount, v1_path), v1_mount[1], _read_cfs_quota)
    return min(quotas) if quotas else None


def _cgroup_mounts(root: Path) -> dict[str, tuple[str, Path]]:
    """Map "cgroup2" and "cpu" to (mount root, mount point) from mountinfo."""
    mounts: dict[str, tuple[str, Path]] = {}
    for line in (_read_text(root / "proc/self/mountinfo") or "").splitlines():
        # "id parent dev root mountpoint opts [optional...] - fstype src superopts"
        before, sep, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        mount_root, mount_point = fields[3], root / fields[4].lstrip("/")
        if tail[0] == "cgroup2":
            mounts.setdefault("cgroup2", (mount_root, mount_point))
        elif tail[0] == "cgroup" and "cpu" in tail[2].split(","):
            mounts.setdefault("cpu", (mount_root, mount_point))
    return mounts


def _default_v1_cpu_mount(root: Path) -> tuple[str, Path] | None:
    for name in ("cpu,cpuacct", "cpu", "cpuacct,cpu"):
        if (root / "sys/fs/cgroup" / name).is_dir():
            return "/", root / "sys/fs/cgroup" / name
    return None


def _cgroup_dir(mount: tuple[str, Path], path: str) -> Path:
    mount_root, mount_point = mount
    # Inside a container the mount root is often the container's own cgroup,
    # so the path from /proc/self/cgroup is relative to it.
    if mount_root != "/" and (path == mount_root or path.startswith(mount_root + "/")):
        path = path[len(mount_root):]
    candidate = mount_point / path.lstrip("/")
    # Without a cgroup namespace the path names a host cgroup that is not
    # visible here; the mount point is then the best we have.
    return candidate if candidate.is_dir() else mount_point


def _walk_quota(start: Path, stop: Path, read: Callable[[Path], float | None]) -> list[float]:
    quotas: list[float] = []
    current = start
    while True:
        quota = read(current)
        if quota is not None:
            quotas.append(quota)
        if current == stop or current.parent == current or stop not in current.parents:
            return quotas
        current = current.parent


def _read_cpu_max(directory: Path) -> float | None:
    # cgroup v2: "max 100000" (no limit) or "<quota> <period>" in microseconds.
    text = _read_text(directory / "cpu.max")
    if text is None:
        return None
    fields = text.split()
    if len(fields) != 2 or fields[0] == "max":
        return None
    return _ratio(fields[0], fields[1])


def _read_cfs_quota(directory: Path) -> float | None:
    # cgroup v1: cpu.cfs_quota_us is -1 when unlimited.
    quota = _read_text(directory / "cpu.cfs_quota_us")
    period = _read_text(directory / "cpu.cfs_period_us")
    if quota is None or period is None:
        return None
    return _ratio(quota.strip(), period.strip())


def _ratio(quota: str, period: str) -> float | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
