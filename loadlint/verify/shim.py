"""The side of verify that runs inside the user's process.

It patches ``torch.utils.data.DataLoader.__init__`` (subclasses inherit the
patch, or reach it through ``super().__init__``), runs the user's script the
way ``python script.py`` would, and records every construction with its
call site. What happens next depends on the mode the parent asked for:

``bench``
    stop the script once the target loader is built, build the candidate
    configurations, check that each yields the same data, then time fresh
    loaders per candidate in rotated rounds (the measurement protocol).
``insitu``
    inject one candidate configuration into the target call, let the
    user's own loop run for warm-up + N steps, time ``next()`` and stop.
``ddp``
    inside one rank of ``torch.distributed.run``: record the sampler's index
    list at every ``iter()`` of the target loader and every ``set_epoch``
    call, feeding the loop a few real batches per epoch only.
``ddp_sim``
    capture without a process group and simulate each rank's
    ``DistributedSampler``.

The parent reads one JSON result file; a progress file that the shim
rewrites after every step is the parent's heartbeat for hang detection.
Everything here is private to verify; only the result schema matters.
"""

from __future__ import annotations

import builtins
import gc
import hashlib
import itertools
import json
import math
import os
import resource
import sys
import threading
import time
import traceback
import types
from collections import Counter
from typing import Any

from loadlint.verify import measure
from loadlint.signature import TUNABLE_DEFAULTS

now = time.perf_counter


class StopScript(BaseException):
    """Ends the user's script once verify has what it needs. A
    BaseException, so that ``except Exception`` in the script cannot keep
    the script running."""


class _State:
    def __init__(self) -> None:
        self.spec: dict[str, Any] = {}
        self.records: list[dict[str, Any]] = []
        self.objects: list[dict[str, Any]] = []  # bound arguments, same index
        self.target: int | None = None
        self.target_instance: Any = None
        self.stop_on_capture = True
        self.stopped = False
        self.depth = threading.local()
        self.notes: list[str] = []
        self.progress_path: str | None = None


S = _State()


def progress(phase: str, **detail: Any) -> None:
    """Heartbeat: the parent treats a stale progress file as a hang."""
    if not S.progress_path:
        return
    # Ranks share the file: a private temporary name per process, and a
    # failed heartbeat must never surface inside the user's loop.
    tmp = f"{S.progress_path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as fh:
            json.dump({"phase": phase, "t": time.time(), **detail}, fh)
        os.replace(tmp, S.progress_path)
    except OSError:
        pass


# --------------------------------------------------------------------------
# Capture
# --------------------------------------------------------------------------


def _is_torch_data_file(filename: str) -> bool:
    return os.sep + os.path.join("torch", "utils", "data") + os.sep in filename


def _call_site(obj: Any) -> tuple[str, int, int]:
    """File and line span of the expression that built ``obj``: the first
    frame outside torch's data package and outside the ``__init__`` chain
    of ``obj`` itself (subclasses calling ``super().__init__``)."""
    f = sys._getframe(2)
    while f is not None:
        code = f.f_code
        if _is_torch_data_file(code.co_filename) or code.co_filename == __file__:
            f = f.f_back
            continue
        if code.co_name == "__init__" and code.co_argcount:
            if f.f_locals.get(code.co_varnames[0]) is obj:
                f = f.f_back
                continue
        break
    if f is None:
        return "<unknown>", 0, 0
    line = end = f.f_lineno
    try:
        pos = list(f.f_code.co_positions())[f.f_lasti // 2]
        if pos[0] is not None:
            line, end = pos[0], pos[1] or pos[0]
    except (AttributeError, IndexError):
        pass
    return os.path.abspath(f.f_code.co_filename), line, end


def _describe(value: Any) -> Any:
    """A JSON-able rendering of an argument for reports."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    try:
        import multiprocessing.context as mpc

        if isinstance(value, mpc.BaseContext):
            return value.get_start_method()
    except Exception:
        pass
    name = getattr(type(value), "__qualname__", type(value).__name__)
    if callable(value) and hasattr(value, "__qualname__"):
        return f"<{value.__qualname__}>"
    try:
        n = len(value)
        return f"<{name} of {n}>"
    except Exception:
        return f"<{name}>"


def tunable_of(bound: dict[str, Any]) -> dict[str, Any]:
    config = {}
    for key, default in TUNABLE_DEFAULTS.items():
        config[key] = _describe(bound.get(key, default))
    return config


def _matches_target(rec: dict[str, Any]) -> bool:
    tgt = S.spec.get("target") or {}
    at = tgt.get("at")
    if at:
        try:
            same = os.path.samefile(rec["file"], at["file"])
        except OSError:
            same = os.path.abspath(rec["file"]) == os.path.abspath(at["file"])
        return same and rec["line"] <= at["line"] <= max(rec["end_line"], rec["line"])
    rows = tgt.get("finding_rows")
    if rows:
        script = tgt.get("file")
        if not script or os.path.abspath(rec["file"]) != os.path.abspath(script):
            return False
        return any(rec["line"] <= r <= rec["end_line"] for r in rows)
    return True


def install_capture(torch: Any) -> None:
    import inspect

    DataLoader = torch.utils.data.DataLoader
    original = DataLoader.__init__
    signature = inspect.signature(original)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        depth = getattr(S.depth, "n", 0)
        if depth or S.target_instance is not None and S.spec["mode"] == "bench":
            return original(self, *args, **kwargs)
        override = S.spec.get("insitu", {}).get("config")
        site = _call_site(self)
        S.depth.n = depth + 1
        try:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            arguments.pop(next(iter(signature.parameters)))
            rec = {
                "index": len(S.records),
                "file": site[0], "line": site[1], "end_line": site[2],
                "class": f"{type(self).__module__}.{type(self).__qualname__}",
                "explicit": sorted(kwargs) + [f"<positional {len(args)}>"] * bool(args),
                "config": tunable_of(arguments),
            }
            is_target = S.target is None and _matches_target(rec)
            if is_target and override is not None:
                arguments.update(config_to_kwargs(override, arguments))
                original(self, **arguments)
            else:
                original(self, *args, **kwargs)
        finally:
            S.depth.n = depth
        try:
            rec["len"] = len(self)
        except Exception:
            rec["len"] = None
        rec["iterable"] = isinstance(self.dataset, torch.utils.data.IterableDataset)
        rec["dataset"] = _describe(self.dataset)
        rec["batch_size"] = self.batch_size
        S.records.append(rec)
        S.objects.append(arguments)
        if is_target:
            S.target = rec["index"]
            S.target_instance = self
            progress("captured", file=rec["file"], line=rec["line"])
            if S.stop_on_capture:
                S.stopped = True
                raise StopScript()

    DataLoader.__init__ = __init__  # type: ignore[method-assign]
    S._original_init = original  # type: ignore[attr-defined]


def uninstall_capture(torch: Any) -> None:
    original = getattr(S, "_original_init", None)
    if original is not None:
        torch.utils.data.DataLoader.__init__ = original


def config_to_kwargs(config: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """Tunable values for DataLoader, keeping the user's own context object
    when the start method it names is unchanged."""
    out = {}
    for key in TUNABLE_DEFAULTS:
        if key not in config:
            continue
        value = config[key]
        if key == "multiprocessing_context" and isinstance(value, str):
            mine = arguments.get(key)
            if _describe(mine) == value:
                value = mine
        out[key] = value
    if not out.get("num_workers", arguments.get("num_workers", 0)):
        # Keywords DataLoader rejects or asserts on without workers.
        out.update(prefetch_factor=None, persistent_workers=False,
                   multiprocessing_context=None, timeout=0)
    return out


def run_user_code(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the script (as ``python script.py`` would) or call the entry.

    Returns the outcome: ``captured`` / ``finished`` / ``crashed`` /
    ``exited`` with details for the one-line message the parent prints.
    """
    entry = spec.get("entry")
    try:
        if entry:
            return _run_entry(entry)
        _run_script(spec["script"], spec.get("args", []))
        return {"outcome": "finished"}
    except StopScript:
        return {"outcome": "captured"}
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if S.target is not None:
            return {"outcome": "captured"}
        return {"outcome": "exited", "code": code,
                "message": "" if isinstance(exc.code, int) or exc.code is None else str(exc.code)}
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the user's code may raise anything
        return {"outcome": "crashed", "type": type(exc).__name__,
                "message": str(exc).splitlines()[0][:300] if str(exc) else "",
                "where": _user_frame(exc, spec)}


def _user_frame(exc: BaseException, spec: dict[str, Any]) -> str | None:
    import sysconfig

    frames = traceback.extract_tb(exc.__traceback__)
    script = os.path.abspath(spec["script"]) if spec.get("script") else None
    libs = {os.path.abspath(p) for k, p in sysconfig.get_paths().items()
            if k in ("stdlib", "platstdlib", "purelib", "platlib")}
    here = os.path.dirname(os.path.abspath(__file__))
    best = None
    for fr in frames:
        fn = os.path.abspath(fr.filename)
        if fn == script:
            best = fr
        elif (not fn.startswith(here) and not fr.filename.startswith("<")
              and not any(fn.startswith(lib + os.sep) for lib in libs)):
            best = fr
    if best is None:
        return None
    return f"{os.path.relpath(best.filename, spec.get('cwd') or os.getcwd())}:{best.lineno}"


def _run_script(path: str, args: list[str]) -> None:
    """coverage.py's exec runner, reduced: a fresh ``__main__`` that stays
    in ``sys.modules`` so that spawn/forkserver workers find the script's
    classes by re-running it as ``__mp_main__``."""
    path = os.path.abspath(path)
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__builtins__ = builtins  # type: ignore[attr-defined]
    main.__spec__ = None
    main.__package__ = None
    main.__loader__ = None  # type: ignore[assignment]
    sys.modules["__main__"] = main
    sys.argv = [path, *args]
    sys.path[0] = os.path.dirname(path)
    with open(path, "rb") as fh:
        source = fh.read()
    code = compile(source, path, "exec", dont_inherit=True)
    exec(code, main.__dict__)


def _run_entry(entry: str) -> dict[str, Any]:
    import importlib

    import torch

    module_name, _, func_name = entry.partition(":")
    sys.path[0] = os.getcwd()
    S.stop_on_capture = False
    module = importlib.import_module(module_name)
    value = getattr(module, func_name)()
    if isinstance(value, torch.utils.data.DataLoader):
        for i, rec in enumerate(S.records):
            if S.target is None and S.objects[i].get("dataset") is value.dataset:
                S.target = i
        if S.target is None:
            return {"outcome": "crashed", "type": "TypeError",
                    "message": f"{entry} returned a DataLoader built before the shim was active",
                    "where": None}
        return {"outcome": "captured"}
    if isinstance(value, torch.utils.data.Dataset):
        S.target = None
        S.spec.setdefault("target", {})["at"] = None
        S.stop_on_capture = False
        holder = torch.utils.data.DataLoader(value)  # recorded by the patch
        del holder
        rec = S.records[-1]
        code = getattr(module, func_name).__code__
        rec.update(file=os.path.abspath(code.co_filename), line=code.co_firstlineno,
                   end_line=code.co_firstlineno, synthetic=True)
        S.target = rec["index"]
        S.notes.append(f"{entry} returned a Dataset: measured from DataLoader(dataset) defaults")
        return {"outcome": "captured"}
    return {"outcome": "crashed", "type": "TypeError",
            "message": f"{entry} returned {type(value).__name__}, not a Dataset or DataLoader",
            "where": None}


# --------------------------------------------------------------------------
# Machine probes
# --------------------------------------------------------------------------

_CLK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _affinity() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def _proc_stat_busy(cpus: list[int]) -> float | None:
    """Busy jiffies (steal included) on ``cpus``, from /proc/stat."""
    try:
        with open("/proc/stat") as fh:
            lines = fh.readlines()
    except OSError:
        return None
    wanted = {f"cpu{c}" for c in cpus}
    busy = 0
    for line in lines:
        parts = line.split()
        if parts and parts[0] in wanted:
            v = [int(x) for x in parts[1:9]]
            # user nice system idle iowait irq softirq steal
            busy += v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
    return busy / _CLK


def _schedstat_wait(pid: int | str, all_threads: bool) -> float:
    total = 0.0
    paths = []
    if all_threads:
        try:
            paths = [f"/proc/{pid}/task/{t}/schedstat" for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            return 0.0
    else:
        paths = [f"/proc/{pid}/schedstat"]
    for p in paths:
        try:
            with open(p) as fh:
                total += int(fh.read().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            pass
    return total


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _shm_used() -> int | None:
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def _cpu_seconds() -> float:
    a = resource.getrusage(resource.RUSAGE_SELF)
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


class WindowMeter:
    """One contention window: our CPU time, our run-queue wait, and the
    busy time on our CPUs that is not ours."""

    def __init__(self, usable: float, demand: int, attributable: bool) -> None:
        self.cpus = _affinity()
        self.usable = usable
        self.demand = demand
        self.attributable = attributable
        self.worker_wait: dict[int, float] = {}

    def start(self) -> None:
        self.t0 = now()
        self.busy0 = _proc_stat_busy(self.cpus)
        self.cpu0 = _cpu_seconds()
        self.wait0 = _schedstat_wait(os.getpid(), True)

    def sample_workers(self, pids: list[int]) -> None:
        for pid in pids:
            self.worker_wait[pid] = _schedstat_wait(pid, True)

    def stop(self) -> dict[str, Any]:
        wall = now() - self.t0
        busy1 = _proc_stat_busy(self.cpus)
        ours = _cpu_seconds() - self.cpu0
        wait = _schedstat_wait(os.getpid(), True) - self.wait0 + sum(self.worker_wait.values())
        foreign = None
        if self.attributable and busy1 is not None and self.busy0 is not None:
            foreign = max(0.0, (busy1 - self.busy0) - ours)
        return {"wall_s": wall, "usable_cpus": self.usable, "foreign_busy_s": foreign,
                "our_cpu_s": ours, "runq_wait_s": wait, "demand": self.demand}


def preflight(torch: Any, profile: Any, rec: dict[str, Any] | None,
              arguments: dict[str, Any] | None) -> dict[str, Any]:
    import multiprocessing

    cpus = _affinity()
    b0 = _proc_stat_busy(cpus)
    steal0 = _steal(cpus)
    time.sleep(0.3)
    b1 = _proc_stat_busy(cpus)
    steal1 = _steal(cpus)
    busy_share = None if b0 is None or b1 is None else (b1 - b0) / (0.3 * len(cpus))
    script_method = multiprocessing.get_start_method(allow_none=True)
    ctx = arguments.get("multiprocessing_context") if arguments else None
    if ctx is not None:
        method, origin = _describe(ctx), "multiprocessing_context"
    elif script_method:
        method, origin = script_method, "set by the script or its libraries"
    else:
        method = _default_start_method()
        origin = f"Python {sys.version_info[0]}.{sys.version_info[1]} default"
    mem_avail = None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    mem_avail = int(line.split()[1]) * 1024
    except OSError:
        pass
    shm_free = None
    try:
        st = os.statvfs("/dev/shm")
        shm_free = st.f_bavail * st.f_frsize
    except OSError:
        pass
    return {
        "usable_cpus": profile.usable_cpus,
        "affinity_cpus": len(cpus),
        "cgroup_cpus": profile.cgroup_cpus,
        "logical_cpus": profile.logical_cpus,
        "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "busy_share": busy_share,
        "steal_share": None if steal0 is None or steal1 is None
        else (steal1 - steal0) / (0.3 * len(cpus)),
        "start_method": method,
        "start_method_origin": origin,
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "shm_free": shm_free,
        "memory_available": mem_avail,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": bool(torch.cuda.is_available()),
        "gpu_count": getattr(profile, "gpu_count", None),
    }


def _steal(cpus: list[int]) -> float | None:
    try:
        with open("/proc/stat") as fh:
            lines = fh.readlines()
    except OSError:
        return None
    wanted = {f"cpu{c}" for c in cpus}
    return sum(int(p[8]) for p in (ln.split() for ln in lines) if p and p[0] in wanted) / _CLK


def _default_start_method() -> str:
    if sys.platform in ("win32", "darwin"):
        return "spawn"
    return "forkserver" if sys.version_info >= (3, 14) else "fork"


# --------------------------------------------------------------------------
# Data identity: sample digests
# --------------------------------------------------------------------------


def _leaves(obj: Any, out: list[Any]) -> None:
    if isinstance(obj, dict):
        for key in sorted(obj, key=str):
            _leaves(obj[key], out)
    elif isinstance(obj, (list, tuple)) and not (obj and isinstance(obj[0], (str, bytes))):
        for item in obj:
            _leaves(item, out)
    else:
        out.append(obj)


def _bytes_of(value: Any) -> bytes:
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        return value.detach().cpu().contiguous().numpy().tobytes() + str(value.dtype).encode()
    if hasattr(value, "tobytes"):
        return value.tobytes()
    return repr(value).encode()


def sample_digests(batch: Any, batched: bool) -> list[str]:
    """One digest per sample of a collated batch (rows along dim 0)."""
    if not batched:
        return [hashlib.blake2b(b"".join(_bytes_of(v) for v in _flat(batch)), digest_size=12).hexdigest()]
    leaves = _flat(batch)
    n = None
    for leaf in leaves:
        shape = getattr(leaf, "shape", None)
        if shape is not None and len(shape) > 0:
            n = shape[0]
            break
        if isinstance(leaf, (list, tuple)):
            n = len(leaf)
            break
    if n is None:
        return [hashlib.blake2b(b"".join(_bytes_of(v) for v in leaves), digest_size=12).hexdigest()]
    out = []
    for i in range(n):
        h = hashlib.blake2b(digest_size=12)
        for leaf in leaves:
            shape = getattr(leaf, "shape", None)
            if shape is not None and len(shape) > 0 and shape[0] == n:
                h.update(_bytes_of(leaf[i]))
            elif isinstance(leaf, (list, tuple)) and len(leaf) == n:
                h.update(_bytes_of(leaf[i]))
            else:
                h.update(_bytes_of(leaf))
        out.append(h.hexdigest())
    return out


def _flat(obj: Any) -> list[Any]:
    out: list[Any] = []
    _leaves(obj, out)
    return out


# --------------------------------------------------------------------------
# Loaders for candidates
# --------------------------------------------------------------------------


def _limited_class() -> Any:
    import torch

    class _LimitedIterable(torch.utils.data.IterableDataset):
        """An IterableDataset cut to ``total`` samples shared among workers,
        so that a benchmark epoch of a long stream still ends."""

        def __init__(self, dataset: Any, total: int) -> None:
            self.dataset = dataset
            self.total = total

        def __iter__(self) -> Any:
            info = torch.utils.data.get_worker_info()
            share = self.total if info is None else math.ceil(self.total / info.num_workers)
            return itertools.islice(iter(self.dataset), share)

    _LimitedIterable.__module__ = __name__
    _LimitedIterable.__qualname__ = "_LimitedIterable"
    return _LimitedIterable


def __getattr__(name: str) -> Any:
    # Built on first use because this module must import without torch;
    # reachable as a module attribute so that spawn workers unpickle it.
    if name == "_LimitedIterable":
        cls = _limited_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)


def _LimitedBase(dataset: Any, total: int) -> Any:
    cls = globals().get("_LimitedIterable") or __getattr__("_LimitedIterable")
    return cls(dataset, total)


def make_loader(torch: Any, arguments: dict[str, Any], config: dict[str, Any],
                plan: list[Any] | None = None, auto_collation: bool = True,
                dataset: Any = None) -> Any:
    kw = dict(arguments)
    kw.update(config_to_kwargs(config, arguments))
    if dataset is not None:
        kw["dataset"] = dataset
    if plan is not None:
        if auto_collation:
            kw.update(batch_sampler=plan, batch_size=1, shuffle=None, sampler=None,
                      drop_last=False)
        else:
            kw.update(sampler=plan, shuffle=None, batch_sampler=None)
    if not kw.get("pin_memory_device"):
        kw.pop("pin_memory_device", None)
    return torch.utils.data.DataLoader(**kw)


def _shutdown(loader: Any, it: Any = None) -> None:
    for obj in (it, getattr(loader, "_iterator", None)):
        stop = getattr(obj, "_shutdown_workers", None)
        if stop is not None:
            try:
                stop()
            except Exception:
                pass
    try:
        loader._iterator = None
    except Exception:
        pass


def _workers_of(it: Any) -> list[int]:
    return [w.pid for w in getattr(it, "_workers", []) if getattr(w, "pid", None)]


def _seeded(torch: Any, arguments: dict[str, Any]) -> Any:
    """Same seed for every candidate's sampler: the index streams of two
    shuffled loaders are then comparable element for element."""
    torch.manual_seed(0)
    gen = arguments.get("generator")
    return gen.get_state() if gen is not None else None


def _restore(arguments: dict[str, Any], state: Any) -> None:
    if state is not None:
        arguments["generator"].set_state(state)


# --------------------------------------------------------------------------
# bench mode
# --------------------------------------------------------------------------


class Bench:
    def __init__(self, torch: Any, spec: dict[str, Any], rec: dict[str, Any],
                 arguments: dict[str, Any], profile: Any) -> None:
        self.torch = torch
        self.spec = spec
        self.rec = rec
        self.arguments = arguments
        self.profile = profile
        self.protocol = measure.Protocol(**spec.get("protocol", {}))
        self.iterable = rec["iterable"]
        self.auto = arguments.get("batch_size") is not None or arguments.get("batch_sampler") is not None
        self.cuda = bool(torch.cuda.is_available())
        self.step_s = (spec.get("step_ms") or 0) / 1000.0
        usable = profile.usable_cpus
        self.attributable = not (profile.cgroup_cpus and profile.cgroup_cpus < len(_affinity()) - 0.5)
        self.usable = usable

    # -- candidates -----------------------------------------------------
    def candidates(self) -> list[dict[str, Any]]:
        from loadlint.verify.adapters import suggested_config

        current = dict(self.rec["config"])
        out = [{"name": "current", "config": current, "origin": "the call as written"}]
        seen = [_canon(current)]

        def add(name: str, config: dict[str, Any], origin: str) -> None:
            config = _normalise(config)
            key = _canon(config)
            if key in seen:
                for c in out:
                    if _canon(c["config"]) == key and name not in c.get("aliases", []):
                        c.setdefault("aliases", []).append(name)
                return
            seen.append(key)
            out.append({"name": name, "config": config, "origin": origin})

        ranks = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
        batch_size = self.arguments.get("batch_size")
        suggested, origin = suggested_config(
            self.rec["file"], self.rec["line"], self.profile, current, cuda=self.cuda,
            ranks_per_node=ranks, batch_size=batch_size if isinstance(batch_size, int) else None)
        add("suggested", suggested, origin)
        for i, extra in enumerate(self.spec.get("tries") or []):
            config = dict(current)
            config.update(extra)
            add(f"try{i + 1}" if len(self.spec["tries"]) > 1 else "try", config, "--try")
        return out

    # -- equivalence ----------------------------------------------------
    def index_stream(self, config: dict[str, Any], limit: int) -> tuple[list[Any], int | None]:
        loader = make_loader(self.torch, self.arguments, config)
        state = _seeded(self.torch, self.arguments)
        try:
            stream = list(itertools.islice(iter(loader._index_sampler), limit))
            total = len(loader)
        finally:
            _restore(self.arguments, state)
        return [list(b) if isinstance(b, (list, tuple)) else b for b in stream], total

    def iterable_digests(self, config: dict[str, Any], budget_s: float) -> dict[str, Any]:
        loader = make_loader(self.torch, self.arguments, config)
        digests: list[str] = []
        complete = True
        t0 = now()
        it = iter(loader)
        try:
            for batch in it:
                digests.extend(sample_digests(batch, self.auto))
                if now() - t0 > budget_s:
                    complete = False
                    break
        finally:
            _shutdown(loader, it)
        return {"digests": digests, "complete": complete}

    def equivalence(self, cands: list[dict[str, Any]]) -> None:
        progress("equivalence")
        if self.iterable:
            budget = float(self.spec.get("equivalence_budget_s", 60.0))
            ref = self.iterable_digests(cands[0]["config"], budget)
            for c in cands[1:]:
                try:
                    got = self.iterable_digests(c["config"], budget)
                except Exception as exc:
                    c["error"] = _failure(exc)
                    continue
                c["equivalence"] = compare_iterable(ref, got)
                progress("equivalence", candidate=c["name"])
            cands[0]["equivalence"] = {"equivalent": True, "how": "reference",
                                       "samples": len(ref["digests"])}
            return
        limit = int(self.spec.get("equivalence_batches", 100000))
        ref, total = self.index_stream(cands[0]["config"], limit)
        cands[0]["equivalence"] = {"equivalent": True, "how": "reference", "batches": total}
        for c in cands[1:]:
            try:
                got, n = self.index_stream(c["config"], limit)
            except Exception as exc:
                c["error"] = _failure(exc)
                continue
            same = got == ref and n == total
            c["equivalence"] = {
                "equivalent": same,
                "how": "same index stream" if same else "index stream differs",
                "batches": n,
                "detail": None if same else f"{total} batches as written, {n} with this config",
            }

    # -- one timed run --------------------------------------------------
    def plan(self, n_batches: int) -> list[Any] | None:
        if self.iterable:
            return None
        loader = make_loader(self.torch, self.arguments, self.rec["config"])
        state = _seeded(self.torch, self.arguments)
        try:
            plan = [list(b) if isinstance(b, (list, tuple)) else b
                    for b in itertools.islice(iter(loader._index_sampler), n_batches)]
        finally:
            _restore(self.arguments, state)
        return plan

    def run(self, config: dict[str, Any], plan: list[Any] | None, limit_samples: int | None) -> dict[str, Any]:
        torch = self.torch
        nw = int(config.get("num_workers") or 0)
        pf = config.get("prefetch_factor")
        dataset = None
        if self.iterable and limit_samples:
            dataset = _LimitedBase(self.arguments["dataset"], limit_samples)
        loader = make_loader(torch, self.arguments, config, plan=plan,
                             auto_collation=self.auto, dataset=dataset)
        warm = self.protocol.warmup(nw, pf)
        need = self.protocol.measured(nw)
        meter = WindowMeter(self.usable, nw + 1, self.attributable)
        shm0 = _shm_used()
        pss_max = 0
        shm_max = 0
        epochs: list[dict[str, Any]] = []
        steady_b = 0
        steady_s = 0.0
        wait_s = 0.0
        total_b = 0
        h2d = {"bytes": 0, "seconds": 0.0}
        last_sample = 0.0
        pending_stop = 0.0
        meter.start()
        t_run = now()
        deadline = t_run + max(60.0, 30 * self.protocol.seconds_min)
        while True:
            t_iter = now()
            it = iter(loader)
            nb = 0
            start_s = None
            while True:
                t0 = now()
                try:
                    batch = next(it)
                except StopIteration:
                    stop_s = now() - t0
                    break
                t1 = now()
                if self.cuda:
                    self._h2d(batch, config, h2d)
                if self.step_s:
                    time.sleep(self.step_s)
                t2 = now()
                nb += 1
                total_b += 1
                if nb == 1:
                    start_s = t1 - t_iter + pending_stop
                elif total_b > warm:
                    steady_b += 1
                    steady_s += t2 - t0
                    wait_s += t1 - t0
                if t2 - last_sample > 0.5:
                    last_sample = t2
                    pids = _workers_of(it)
                    meter.sample_workers(pids)
                    pss_max = max(pss_max, sum(_pss(p) for p in pids))
                    used = _shm_used()
                    if used is not None and shm0 is not None:
                        shm_max = max(shm_max, used - shm0)
                del batch
            pending_stop = stop_s
            epochs.append({"batches": nb, "start_s": start_s, "stop_s": stop_s,
                           "seconds": now() - t_iter})
            progress("run", epochs=len(epochs))
            if nb == 0:
                break
            if len(epochs) >= 2 and steady_s >= self.protocol.seconds_min and steady_b >= need:
                break
            if now() > deadline and len(epochs) >= 2:
                break
        pids = _workers_of(getattr(loader, "_iterator", None))
        meter.sample_workers(pids)
        _shutdown(loader, it)
        del it, loader
        gc.collect()
        window = meter.stop()
        return {
            "epochs": epochs,
            "ttfb_s": epochs[0]["start_s"] if epochs else None,
            "steady_batches": steady_b,
            "steady_s": steady_s,
            "data_wait_s": wait_s,
            "warmup_batches": warm,
            "total_batches": total_b,
            "wall_s": now() - t_run,
            "cpu_s": window["our_cpu_s"],
            "worker_pss": pss_max,
            "shm_growth": shm_max,
            "window": window,
            "h2d": h2d if self.cuda else None,
        }

    def _h2d(self, batch: Any, config: dict[str, Any], acc: dict[str, Any]) -> None:
        torch = self.torch
        t0 = now()
        n = 0
        for leaf in _flat(batch):
            if torch.is_tensor(leaf):
                leaf.to("cuda", non_blocking=True)
                n += leaf.numel() * leaf.element_size()
        torch.cuda.current_stream().synchronize()
        acc["bytes"] += n
        acc["seconds"] += now() - t0

    # -- the protocol ---------------------------------------------------
    def benchmark(self, cands: list[dict[str, Any]]) -> dict[str, Any]:
        usable = [c for c in cands if not c.get("error")
                  and c.get("equivalence", {}).get("equivalent", False)]
        real_len = self.rec.get("len")
        batches_needed = max(self.protocol.warmup(int(c["config"]["num_workers"] or 0),
                                                  c["config"].get("prefetch_factor"))
                             + self.protocol.measured(int(c["config"]["num_workers"] or 0))
                             for c in usable)
        # Calibration: one discarded run of the current configuration, which
        # also warms the page cache so that the first timed run is not the
        # only one reading from disk.
        progress("calibrate")
        plan = self.plan(batches_needed)
        limit = None if not self.iterable else self._iterable_limit(batches_needed)
        calib = self.run(cands[0]["config"], plan, limit)
        per_batch = calib["steady_s"] / max(1, calib["steady_batches"])
        if per_batch > 0 and real_len:
            want = math.ceil(self.protocol.seconds_min / 2 / per_batch)
            n = min(max(batches_needed, want), real_len)
            if n > batches_needed:
                plan = self.plan(n)
                if self.iterable:
                    limit = self._iterable_limit(n)
        plan_batches = len(plan) if plan is not None else None
        rounds = self.protocol.repeats
        done = 0
        t_start = now()
        budget = float(self.spec.get("budget_s") or 0) or 10 * rounds * max(
            self.protocol.seconds_min * 2, calib["wall_s"]) * len(usable)
        active = list(usable)
        order_base = active
        while True:
            for c in _rotate(order_base, done):
                if c not in active:
                    continue
                self._run_gated(c, plan, limit)
            done += 1
            if done < rounds:
                continue
            pending = [c for c in usable[1:]
                       if _decide(usable[0], c).verdict == "inconclusive"
                       and not c.get("contended_out")]
            if not pending or done >= self.protocol.max_rounds or now() - t_start > budget:
                break
            active = [usable[0], *pending]
            order_base = active
        return {"plan_batches": plan_batches, "limit_samples": limit,
                "calibration": calib, "rounds": done, "real_len": real_len}

    def _iterable_limit(self, batches: int) -> int:
        bs = self.arguments.get("batch_size") or 1
        return int(batches * bs)

    def _run_gated(self, c: dict[str, Any], plan: Any, limit: Any) -> None:
        c.setdefault("runs", [])
        for attempt in range(self.protocol.max_retries + 1):
            if attempt:
                time.sleep(0.5 * attempt)  # let a passing burst of other work end
            progress("run", candidate=c["name"], attempt=attempt)
            try:
                r = self.run(c["config"], plan, limit)
            except Exception as exc:
                c["error"] = _failure(exc)
                return
            g = measure.gate(measure.Window.from_dict(r["window"]))
            r["gate"] = {"contended": g.contended, "foreign_share": g.foreign_share,
                         "wait_share": g.wait_share, "reason": g.reason}
            r["rate"] = run_rate(r, self.rec.get("len"), self.rec.get("iterable"))
            if not g.contended:
                c["runs"].append(r)
                return
            c.setdefault("contended_runs", []).append(r)
        c["contended_out"] = True


def run_rate(run: dict[str, Any], real_len: int | None, iterable: bool | None) -> float:
    """The rate a verdict uses: user epochs per second projected from this
    run (start-up + len / steady rate), or batches per second when the
    real epoch length is unknown."""
    steady = run["steady_batches"] / run["steady_s"] if run["steady_s"] > 0 else 0.0
    if not real_len:
        return steady
    later = [e["start_s"] for e in run["epochs"][1:] if e["start_s"] is not None]
    startup = measure.median(later) if later else (run["ttfb_s"] or 0.0)
    epoch = measure.project_epoch(startup, steady, real_len)
    return 1.0 / epoch if epoch and math.isfinite(epoch) else 0.0


def _decide(current: dict[str, Any], cand: dict[str, Any]) -> measure.Decision:
    return measure.decide([r["rate"] for r in current.get("runs", [])],
                          [r["rate"] for r in cand.get("runs", [])])


def compare_iterable(ref: dict[str, Any], got: dict[str, Any]) -> dict[str, Any]:
    a, b = Counter(ref["digests"]), Counter(got["digests"])
    if ref["complete"] and got["complete"]:
        same = a == b
        if same:
            how = f"same {len(ref['digests'])} samples (hashes, any order)"
        else:
            dup = sum(n - 1 for n in b.values() if n > 1) - sum(n - 1 for n in a.values() if n > 1)
            how = (f"{len(got['digests'])} samples instead of {len(ref['digests'])}"
                   + (f"; {dup} duplicated samples (the dataset is not worker-aware: every "
                      "worker yields the whole stream)" if dup > 0 else ""))
        return {"equivalent": same, "how": how, "samples": len(got["digests"])}
    k = min(len(ref["digests"]), len(got["digests"]))
    dup_ref = sum(n - 1 for n in Counter(ref["digests"][:k]).values() if n > 1)
    dup_got = sum(n - 1 for n in Counter(got["digests"][:k]).values() if n > 1)
    if dup_got > dup_ref:
        return {"equivalent": False, "samples": k,
                "how": f"{dup_got} duplicated samples among the first {k} (not worker-aware)"}
    return {"equivalent": True, "samples": k,
            "how": f"no duplicates among the first {k} samples (epoch too long to compare whole)"}


def _rotate(items: list[Any], r: int) -> list[Any]:
    if not items:
        return []
    r %= len(items)
    return items[r:] + items[:r]


def _normalise(config: dict[str, Any]) -> dict[str, Any]:
    config = dict(config)
    if not config.get("num_workers"):
        config.update(num_workers=0, prefetch_factor=None, persistent_workers=False,
                      multiprocessing_context=None, timeout=0)
    return config


def _canon(config: dict[str, Any]) -> str:
    c = dict(config)
    if c.get("num_workers") and c.get("prefetch_factor") is None:
        c["prefetch_factor"] = 2
    return json.dumps(c, sort_keys=True, default=str)


def _failure(exc: BaseException) -> dict[str, Any]:
    text = str(exc).strip().splitlines()
    return {"type": type(exc).__name__, "message": text[0][:300] if text else ""}


# --------------------------------------------------------------------------
# --tune
# --------------------------------------------------------------------------


def tune(bench: Bench, cands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sweep num_workers, then persistent_workers x prefetch_factor on the
    best worker counts, one run per point, dropping clearly slower
    branches; return the finalists for the full protocol."""
    current = cands[0]
    plan = bench.plan(max(bench.protocol.warmup(n, 4) + bench.protocol.measured(n)
                          for n in measure.num_workers_sweep(bench.usable)))
    limit = None
    if bench.iterable:
        limit = bench._iterable_limit(bench.protocol.warmup(bench.usable, 4)
                                      + bench.protocol.measured(bench.usable))
    points: list[dict[str, Any]] = []
    reference = None if bench.iterable else bench.index_stream(current["config"], 100000)

    def probe(config: dict[str, Any], name: str) -> dict[str, Any] | None:
        config = _normalise(config)
        for p in [current, *points]:
            if _canon(p["config"]) == _canon(config):
                return p if p is not current else None
        point = {"name": name, "config": config, "origin": "--tune", "runs": []}
        if bench.iterable:
            point["equivalence"] = compare_iterable(
                bench.iterable_digests(current["config"], 30.0),
                bench.iterable_digests(config, 30.0))
        else:
            ref, total = reference
            got, n = bench.index_stream(config, 100000)
            same = got == ref and n == total
            point["equivalence"] = {"equivalent": same, "batches": n,
                                    "how": "same index stream" if same else "index stream differs"}
        if not point["equivalence"]["equivalent"]:
            points.append(point)
            return None
        bench._run_gated(point, plan, limit)
        points.append(point)
        return point

    progress("tune")
    bench._run_gated(current, plan, limit)
    best_rates = current["runs"] and [current["runs"][0]["rate"]] or []
    by_nw: dict[int, dict[str, Any]] = {}
    for nw in measure.num_workers_sweep(bench.usable):
        cfg = dict(current["config"], num_workers=nw, persistent_workers=False,
                   prefetch_factor=None)
        p = probe(cfg, f"nw={nw}")
        if p is None or not p.get("runs"):
            continue
        by_nw[nw] = p
        rates = [r["rate"] for r in p["runs"]]
        if best_rates and measure.clearly_slower(rates, best_rates) and nw > 1:
            break  # more workers will not rescue a slower branch
        if not best_rates or measure.median(rates) > measure.median(best_rates):
            best_rates = rates
    ranked = sorted((p for nw, p in by_nw.items() if nw > 0 and p.get("runs")),
                    key=lambda p: -measure.median([r["rate"] for r in p["runs"]]))[:2]
    for p in ranked:
        nw = p["config"]["num_workers"]
        for persistent in (False, True):
            for pf in (2, 4):
                cfg = dict(current["config"], num_workers=nw, persistent_workers=persistent,
                           prefetch_factor=pf)
                q = probe(cfg, f"nw={nw},pw={int(persistent)},pf={pf}")
                if q is None or not q.get("runs"):
                    continue
                rates = [r["rate"] for r in q["runs"]]
                if measure.median(rates) > measure.median(best_rates):
                    best_rates = rates
    live = [p for p in points if p.get("runs") and not measure.clearly_slower(
        [r["rate"] for r in p["runs"]], best_rates)]
    live.sort(key=lambda p: -measure.median([r["rate"] for r in p["runs"]]))
    finalists = [dict(p, runs=[], contended_runs=[], name=f"tuned{i + 1}")
                 for i, p in enumerate(live[:2])]
    for f in finalists:
        f.pop("contended_out", None)
    # The sweep's single runs only rank the points; the verdict rests on
    # fresh rotated rounds.
    current["runs"] = []
    current["contended_runs"] = []
    current.pop("contended_out", None)
    sweep = [{"name": p["name"], "config": p["config"],
              "rate": measure.median([r["rate"] for r in p["runs"]]) if p.get("runs") else None,
              "equivalent": p["equivalence"]["equivalent"],
              "dropped": p not in live} for p in points]
    keep = [c for c in cands]
    for f in finalists:
        if all(_canon(f["config"]) != _canon(c["config"]) for c in keep):
            keep.append(f)
    return keep, sweep  # type: ignore[return-value]


# --------------------------------------------------------------------------
# insitu mode
# --------------------------------------------------------------------------


class _TimedIterator:
    def __init__(self, inner: Any, box: dict[str, Any]) -> None:
        self.inner = inner
        self.box = box

    def __iter__(self) -> "_TimedIterator":
        return self

    def __next__(self) -> Any:
        box = self.box
        t0 = now()
        box["calls"].append(t0)
        if len(box["calls"]) == box["warmup"] + 1:
            box["start"]()
        if len(box["calls"]) > box["warmup"] + box["steps"]:
            box["finish"](self.inner)
            raise StopScript()
        try:
            value = next(self.inner)
        except StopIteration:
            box["calls"].pop()
            box["epochs"] += 1
            raise
        box["blocked"].append(now() - t0)
        return value

    def __len__(self) -> int:
        return len(self.inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def run_insitu(torch: Any, spec: dict[str, Any], profile: Any) -> dict[str, Any]:
    ins = spec["insitu"]
    DataLoader = torch.utils.data.DataLoader
    original_iter = DataLoader.__iter__
    cfg = ins["config"]
    nw = int(cfg.get("num_workers") or 0)
    attributable = not (profile.cgroup_cpus and profile.cgroup_cpus < len(_affinity()) - 0.5)
    meter = WindowMeter(profile.usable_cpus, nw + 1, attributable)
    gpu = GpuSampler() if spec.get("nvml", True) else None
    box: dict[str, Any] = {"calls": [], "blocked": [], "epochs": 0,
                           "warmup": int(ins["warmup"]), "steps": int(ins["steps"])}
    result: dict[str, Any] = {}

    def start() -> None:
        meter.start()
        box["t_start"] = now()
        if gpu:
            gpu.start()

    def finish(inner: Any) -> None:
        meter.sample_workers(_workers_of(inner))
        box["t_end"] = now()
        if gpu:
            result["gpu"] = gpu.stop()
        _shutdown(S.target_instance, inner)
        result["window"] = meter.stop()

    box["start"], box["finish"] = start, finish

    def __iter__(self: Any) -> Any:
        inner = original_iter(self)
        if self is not S.target_instance:
            return inner
        progress("insitu", steps=len(box["calls"]))
        return _TimedIterator(inner, box)

    DataLoader.__iter__ = __iter__  # type: ignore[method-assign]
    S.stop_on_capture = False
    S.spec["target"] = {"at": ins["call"]}
    outcome = run_user_code(spec)
    w, n = box["warmup"], box["steps"]
    calls = box["calls"]
    if "t_end" not in box:
        if len(calls) <= w + 1:
            return {"outcome": outcome, "error": "the script's loop ended during warm-up"
                    if S.target is not None else None}
        # The loop ended early: measure what ran.
        box["t_end"] = calls[-1]
        n = len(calls) - 1 - w
        result["window"] = meter.stop()
        result["short"] = True
    seconds = box["t_end"] - box["t_start"]
    blocked = sum(box["blocked"][w:w + n])
    result.update(outcome=outcome, steps=n, seconds=seconds, blocked_s=blocked,
                  rate=n / seconds if seconds > 0 else 0.0, epochs_seen=box["epochs"] + 1)
    g = measure.gate(measure.Window.from_dict(result["window"]))
    result["gate"] = {"contended": g.contended, "foreign_share": g.foreign_share,
                      "wait_share": g.wait_share, "reason": g.reason}
    return result


class GpuSampler:
    """NVML utilisation every 50 ms on a thread; absent without NVIDIA GPUs."""

    def __init__(self) -> None:
        self.handles: list[Any] = []
        self.samples: list[tuple[float, list[int]]] = []
        self.available = False
        self.reason = "no NVIDIA GPU"
        try:
            import pynvml

            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            self.pynvml = pynvml
            self.available = count > 0
        except Exception as exc:
            self.reason = f"NVML unavailable ({type(exc).__name__})"

    def __bool__(self) -> bool:
        return self.available

    def start(self) -> None:
        self._stop = threading.Event()
        self.t0 = now()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(0.05):
            try:
                utils = [self.pynvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self.handles]
            except Exception:
                continue
            self.samples.append((now() - self.t0, utils))

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self.thread.join(1.0)
        try:
            self.pynvml.nvmlShutdown()
        except Exception:
            pass
        values = [sum(u) / len(u) for _, u in self.samples if u]
        mean = sum(values) / len(values) if values else None
        sd = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5 if values else None
        return {"mean": mean, "stdev": sd, "n": len(values),
                "series": [(round(t, 3), u) for t, u in self.samples]}


# --------------------------------------------------------------------------
# ddp modes
# --------------------------------------------------------------------------


def _flatten_indices(stream: Any, cap: int) -> list[int]:
    out: list[int] = []
    for item in stream:
        if isinstance(item, (list, tuple)):
            out.extend(int(i) for i in item)
        else:
            out.append(int(item))
        if len(out) >= cap:
            break
    return out


def run_ddp(torch: Any, spec: dict[str, Any]) -> dict[str, Any]:
    ddp = spec.get("ddp", {})
    epochs_max = int(ddp.get("epochs", 3))
    batches = int(ddp.get("batches", 2))
    cap = int(ddp.get("cap", 1_000_000))
    DataLoader = torch.utils.data.DataLoader
    original_iter = DataLoader.__iter__
    rank = int(os.environ.get("RANK", "0"))
    info: dict[str, Any] = {"rank": rank, "world_size": int(os.environ.get("WORLD_SIZE", "1")),
                            "epochs": [], "set_epoch": [], "notes": []}
    iters = {"n": 0}

    import torch.distributed as dist

    original_init_pg = dist.init_process_group

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        backend = kwargs.get("backend", args[0] if args else None)
        if backend and "nccl" in str(backend) and not torch.cuda.is_available():
            info["notes"].append(f"the script asked for backend {backend!r}; gloo used (no CUDA)")
            kwargs["backend"] = "gloo"
            args = args[1:]
        info["backend"] = str(kwargs.get("backend", args[0] if args else "default"))
        return original_init_pg(*args, **kwargs)

    dist.init_process_group = init_process_group
    from torch.utils.data.distributed import DistributedSampler

    original_set_epoch = DistributedSampler.set_epoch

    def set_epoch(self: Any, epoch: int) -> None:
        info["set_epoch"].append({"epoch": int(epoch), "before_iter": iters["n"] + 1})
        return original_set_epoch(self, epoch)

    DistributedSampler.set_epoch = set_epoch

    def __iter__(self: Any) -> Any:
        if self is not S.target_instance:
            return original_iter(self)
        iters["n"] += 1
        progress("ddp", epoch=iters["n"])
        if iters["n"] > epochs_max:
            S.stopped = True
            raise StopScript()
        sampler = self.sampler
        if isinstance(self.dataset, torch.utils.data.IterableDataset):
            info["notes"].append("IterableDataset: no sampler indices to compare")
            info["epochs"].append({"indices": None})
            return itertools.islice(original_iter(self), batches)
        stream = list(itertools.islice(iter(self._index_sampler), None))
        info["epochs"].append({"indices": _flatten_indices(stream, cap),
                               "sampler_epoch": getattr(sampler, "epoch", None)})
        auto = self._auto_collation

        def truncated() -> Any:
            for item in stream[:batches]:
                if auto:
                    yield self.collate_fn([self.dataset[i] for i in item])
                else:
                    yield self.collate_fn(self.dataset[item])

        return truncated()

    DataLoader.__iter__ = __iter__  # type: ignore[method-assign]
    S.stop_on_capture = False
    outcome = run_user_code(spec)
    if S.target is not None:
        loader = S.target_instance
        sampler = loader.sampler
        info.update(
            sampler=f"{type(sampler).__module__}.{type(sampler).__qualname__}",
            distributed_sampler=isinstance(sampler, DistributedSampler),
            shuffle=getattr(sampler, "shuffle", None)
            if isinstance(sampler, DistributedSampler)
            else type(sampler).__name__ == "RandomSampler",
            num_replicas=getattr(sampler, "num_replicas", None),
            padded=(getattr(sampler, "total_size", 0) - len(loader.dataset))
            if isinstance(sampler, DistributedSampler) else 0,
            dataset_len=_safe_len(loader.dataset),
            drop_last=bool(getattr(sampler, "drop_last", False)),
            target_index=S.target,
        )
        if outcome.get("outcome") == "crashed":
            info["notes"].append(f"the script crashed inside its loop ({outcome['type']}: "
                                 f"{outcome['message']}); the epochs before it were compared")
    info["outcome"] = outcome
    return info


def run_ddp_sim(torch: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """No process group: capture the loader once, then derive each rank's
    indices from ``DistributedSampler(num_replicas=N, rank=r)`` with the
    script's own sampler settings (or the full stream for every rank when
    the script has no DistributedSampler)."""
    from torch.utils.data.distributed import DistributedSampler

    n = int(spec["ddp"]["nproc"])
    import torch.distributed as dist

    # Enough of a process group for the script to reach its loader on a
    # machine without CUDA/NCCL: rank 0 of a world of 1, devices ignored.
    dist.init_process_group = lambda *a, **k: None  # type: ignore[assignment]
    dist.get_world_size = lambda *a, **k: 1  # type: ignore[assignment]
    dist.get_rank = lambda *a, **k: 0  # type: ignore[assignment]
    dist.barrier = lambda *a, **k: None  # type: ignore[assignment]
    torch.cuda.set_device = lambda *a, **k: None  # type: ignore[assignment]
    S.stop_on_capture = True
    outcome = run_user_code(spec)
    if S.target is None:
        return {"outcome": outcome}
    args = S.objects[S.target]
    loader = S.target_instance
    ranks = []
    sampler = loader.sampler
    is_dist = isinstance(sampler, DistributedSampler)
    for r in range(n):
        if is_dist:
            s = DistributedSampler(loader.dataset, num_replicas=n, rank=r, shuffle=sampler.shuffle,
                                   seed=sampler.seed, drop_last=sampler.drop_last)
            epochs = []
            for e in range(2):
                s.set_epoch(e)
                epochs.append({"indices": list(iter(s))})
            padded = s.total_size - len(loader.dataset)
        else:
            torch.manual_seed(0)
            epochs = [{"indices": _flatten_indices(iter(loader._index_sampler), 10**6)}]
            padded = 0
        ranks.append({"rank": r, "world_size": n, "epochs": epochs, "set_epoch": [],
                      "simulated": True,
                      "sampler": type(sampler).__name__, "distributed_sampler": is_dist,
                      "shuffle": getattr(sampler, "shuffle", None), "padded": padded,
                      "drop_last": bool(getattr(sampler, "drop_last", False)),
                      "dataset_len": _safe_len(loader.dataset), "notes": []})
    del args
    return {"outcome": outcome, "ranks": ranks}


def _safe_len(obj: Any) -> int | None:
    try:
        return len(obj)
    except Exception:
        return None


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------


def main(spec_path: str) -> None:
    with open(spec_path) as fh:
        spec = json.load(fh)
    S.spec = spec
    S.progress_path = spec.get("progress")
    out_path = spec["out"]
    if spec.get("mode") == "ddp":
        out_path = out_path.replace("{rank}", os.environ.get("RANK", "0"))
    result: dict[str, Any] = {"mode": spec["mode"]}
    code = 0
    try:
        try:
            import torch
        except ImportError:
            result["error"] = {"kind": "no_torch",
                               "message": f"torch is not installed for {sys.executable} (pip install 'loadlint[verify]')"}
        else:
            install_capture(torch)
            _dispatch(torch, spec, result)
    except KeyboardInterrupt:
        result["error"] = {"kind": "interrupted", "message": "interrupted"}
        code = 130
    except BaseException as exc:  # reported, never a traceback on the console
        result["error"] = {"kind": "internal",
                           "message": f"{type(exc).__name__}: {exc}",
                           "traceback": traceback.format_exc()}
    if measure.gate_limits()[2]:
        S.notes.append("the contention gate was relaxed (LOADLINT_VERIFY_GATE_SCALE): "
                       "runs on a busy machine were kept, so verdicts may be skewed")
    result["notes"] = result.get("notes", []) + S.notes
    result["captured"] = S.records
    tmp = out_path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(result, fh, default=_describe)
    os.replace(tmp, out_path)
    sys.stdout.flush()
    sys.stderr.flush()
    # The user's script may leave non-daemon threads or atexit hooks that
    # would keep this process alive; the parent cleans up our process group.
    os._exit(code)


def _dispatch(torch: Any, spec: dict[str, Any], result: dict[str, Any]) -> None:
    from loadlint.verify.adapters import detect_profile

    mode = spec["mode"]
    progress("script")
    if mode == "insitu":
        profile = detect_profile()
        r = run_insitu(torch, spec, profile)
        result["run"] = r
        _outcome_error(r.get("outcome", {}), result, spec)
        return
    if mode == "ddp":
        result["rank"] = run_ddp(torch, spec)
        _outcome_error(result["rank"]["outcome"], result, spec)
        return
    if mode == "ddp_sim":
        r = run_ddp_sim(torch, spec)
        result["ranks"] = r.get("ranks")
        _outcome_error(r["outcome"], result, spec)
        return
    outcome = run_user_code(spec)
    uninstall_capture(torch)
    if S.target is None and S.records and not (spec.get("target") or {}).get("at"):
        S.target = 0
        S.target_instance = None
        if (spec.get("target") or {}).get("finding_rows"):
            S.notes.append("no loader with a static finding was built; measured the first one")
    _outcome_error(outcome, result, spec)
    if "error" in result:
        return
    rec = S.records[S.target]
    if outcome["outcome"] == "crashed":
        S.notes.append(f"the script crashed after building its loader ({outcome['type']}); "
                       "the loader was measured anyway")
    arguments = S.objects[S.target]
    profile = detect_profile()
    bench = Bench(torch, spec, rec, arguments, profile)
    result["call"] = rec
    result["preflight"] = preflight(torch, profile, rec, arguments)
    if rec["class"] != "torch.utils.data.dataloader.DataLoader":
        S.notes.append(f"{rec['class']} measured as torch.utils.data.DataLoader with the "
                       "same arguments: behaviour the subclass adds is not timed")
    cands = bench.candidates()
    bench.equivalence(cands)
    result["candidates"] = cands
    if not spec.get("measure", True):
        return
    if spec.get("tune"):
        cands, sweep = tune(bench, cands)  # type: ignore[misc]
        result["candidates"] = cands
        result["sweep"] = sweep
    if len([c for c in cands if c.get("equivalence", {}).get("equivalent")]) < 2:
        S.notes.append("no other equivalent configuration to compare: the current one "
                       "was measured alone")
    result["bench"] = bench.benchmark(cands)
    if bench.cuda:
        result["cuda"] = h2d_bandwidth(torch, bench)
    for c in cands:
        c.pop("contended_out", None)


def _outcome_error(outcome: dict[str, Any], result: dict[str, Any], spec: dict[str, Any]) -> None:
    at = (spec.get("target") or {}).get("at")
    if S.target is not None:
        return
    kind = outcome.get("outcome")
    if kind == "crashed":
        where = f" at {outcome['where']}" if outcome.get("where") else ""
        msg = f"{outcome['type']}{': ' + outcome['message'] if outcome['message'] else ''}{where}"
        result["error"] = {"kind": "crash", "message": msg}
    elif at:
        built = ", ".join(f"{os.path.relpath(r['file'])}:{r['line']}" for r in S.records) or "none"
        result["error"] = {"kind": "no_loader_at",
                           "message": f"no DataLoader was built at {at['file']}:{at['line']} "
                                      f"(loaders built: {built})"}
    elif kind == "exited" and outcome.get("code"):
        detail = f": {outcome['message']}" if outcome.get("message") else ""
        result["error"] = {"kind": "crash",
                           "message": f"the script exited with status {outcome['code']}{detail} "
                                      "before building a DataLoader"}
    else:
        result["error"] = {"kind": "no_loader", "message": "the script finished without building a DataLoader"}


def h2d_bandwidth(torch: Any, bench: Bench) -> dict[str, Any]:
    """Host-to-device GB/s for one real batch, pageable vs pinned, each
    copied with ``non_blocking=True`` as the training loop should."""
    from torch.utils.data._utils.pin_memory import pin_memory

    # Unpinned on purpose: the pageable figure must not inherit the call's
    # own pin_memory=True.
    loader = make_loader(torch, bench.arguments,
                         dict(bench.rec["config"], num_workers=0, pin_memory=False))
    it = iter(loader)
    batch = next(it)
    del it
    out = {}
    for name, b in (("pageable", batch), ("pinned", pin_memory(batch))):
        leaves = [x for x in _flat(b) if torch.is_tensor(x)]
        size = sum(x.numel() * x.element_size() for x in leaves)
        for x in leaves:  # first copy pays for allocation
            x.to("cuda", non_blocking=True)
        torch.cuda.synchronize()
        t0 = now()
        reps = 20
        for _ in range(reps):
            for x in leaves:
                x.to("cuda", non_blocking=True)
        torch.cuda.synchronize()
        dt = now() - t0
        out[name] = {"bytes": size, "gbps": size * reps / dt / 1e9 if dt > 0 else None}
    return out
