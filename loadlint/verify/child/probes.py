"""Machine probes read from ``/proc``: busy and steal time on our CPUs,
run-queue wait, worker memory, shared memory, and the preflight summary."""

from __future__ import annotations

import multiprocessing
import os
import resource
import sys
import time
from dataclasses import dataclass
from typing import Any

from loadlint.hardware.cpus import affinity_set
from loadlint.verify.child.capture import describe

now = time.perf_counter

_CLK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class CpuTimes:
    """Seconds of CPU time on a set of CPUs since boot, from /proc/stat."""

    busy: float  # user nice system irq softirq steal
    steal: float


def cpu_times(cpus: list[int]) -> CpuTimes | None:
    """One read of /proc/stat for ``cpus``; None where it cannot be read."""
    try:
        with open("/proc/stat") as fh:
            lines = fh.readlines()
    except OSError:
        return None
    wanted = {f"cpu{c}" for c in cpus}
    busy = steal = 0
    for line in lines:
        parts = line.split()
        if parts and parts[0] in wanted:
            v = [int(x) for x in parts[1:9]]
            # user nice system idle iowait irq softirq steal
            busy += v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
            steal += v[7]
    return CpuTimes(busy / _CLK, steal / _CLK)


def schedstat_wait(pid: int | str, all_threads: bool) -> float:
    """Seconds the process (or every thread of it) waited on a run queue."""
    if all_threads:
        try:
            paths = [f"/proc/{pid}/task/{t}/schedstat" for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            return 0.0
    else:
        paths = [f"/proc/{pid}/schedstat"]
    total = 0.0
    for p in paths:
        try:
            with open(p) as fh:
                total += int(fh.read().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            pass
    return total


def pss(pid: int) -> int:
    """Proportional set size of one process in bytes (0 when unknown)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def shm_used() -> int | None:
    """Bytes in use on /dev/shm."""
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def cpu_seconds() -> float:
    """CPU time of this process and its reaped children."""
    a = resource.getrusage(resource.RUSAGE_SELF)
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def attributable(profile: Any) -> bool:
    """Whether busy time on our CPUs is ours to count: not under a CPU
    quota smaller than the CPUs we may run on (other tenants share them)."""
    return not (profile.cgroup_cpus and profile.cgroup_cpus < len(affinity_set()) - 0.5)


class WindowMeter:
    """One contention window: our CPU time, our run-queue wait, and the
    busy time on our CPUs that is not ours."""

    def __init__(self, usable: float, demand: int, attributable: bool) -> None:
        self.cpus = affinity_set()
        self.usable = usable
        self.demand = demand
        self.attributable = attributable
        self.worker_wait: dict[int, float] = {}

    def start(self) -> None:
        self.t0 = now()
        self.times0 = cpu_times(self.cpus)
        self.cpu0 = cpu_seconds()
        self.wait0 = schedstat_wait(os.getpid(), True)

    def sample_workers(self, pids: list[int]) -> None:
        for pid in pids:
            self.worker_wait[pid] = schedstat_wait(pid, True)

    def stop(self) -> dict[str, Any]:
        wall = now() - self.t0
        times1 = cpu_times(self.cpus)
        ours = cpu_seconds() - self.cpu0
        wait = schedstat_wait(os.getpid(), True) - self.wait0 + sum(self.worker_wait.values())
        foreign = None
        if self.attributable and times1 is not None and self.times0 is not None:
            foreign = max(0.0, (times1.busy - self.times0.busy) - ours)
        return {"wall_s": wall, "usable_cpus": self.usable, "foreign_busy_s": foreign,
                "our_cpu_s": ours, "runq_wait_s": wait, "demand": self.demand}


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _shm_free() -> int | None:
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def preflight(torch: Any, profile: Any, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """What the machine looked like before measuring (the report's header)."""
    cpus = affinity_set()
    t0 = cpu_times(cpus)
    time.sleep(0.3)
    t1 = cpu_times(cpus)
    span = 0.3 * len(cpus)
    script_method = multiprocessing.get_start_method(allow_none=True)
    ctx = arguments.get("multiprocessing_context") if arguments else None
    if ctx is not None:
        method, origin = describe(ctx), "multiprocessing_context"
    elif script_method:
        method, origin = script_method, "set by the script or its libraries"
    else:
        method = default_start_method()
        origin = f"Python {sys.version_info[0]}.{sys.version_info[1]} default"
    return {
        "usable_cpus": profile.usable_cpus,
        "affinity_cpus": len(cpus),
        "cgroup_cpus": profile.cgroup_cpus,
        "logical_cpus": profile.logical_cpus,
        "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "busy_share": None if t0 is None or t1 is None else (t1.busy - t0.busy) / span,
        "steal_share": None if t0 is None or t1 is None else (t1.steal - t0.steal) / span,
        "start_method": method,
        "start_method_origin": origin,
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "shm_free": _shm_free(),
        "memory_available": _meminfo_available(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": bool(torch.cuda.is_available()),
        "gpu_count": getattr(profile, "gpu_count", None),
    }


def default_start_method() -> str:
    """The start method multiprocessing uses when nobody sets one."""
    if sys.platform in ("win32", "darwin"):
        return "spawn"
    return "forkserver" if sys.version_info >= (3, 14) else "fork"
