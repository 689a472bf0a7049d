"""The instrument inside the user's process: every DataLoader the script
builds is recorded with its call site, and every iterator it hands out is
wrapped, so that each ``next()`` is timed without touching the user's code.

A step is the span from one ``next()`` call to the next one on the same
pass: the wait inside ``next()`` is the data wait, the rest is the user's
step.  The last step of a pass ends at the ``next()`` that raises
``StopIteration``; a pass left with ``break`` loses its last step (its end
is unknown).
"""

from __future__ import annotations

import os
import threading
import time
from array import array
from typing import Any, Callable

from loadlint.verify.child.capture import call_site, describe

SINGLE, MULTI = "_SingleProcessDataLoaderIter", "_MultiProcessingDataLoaderIter"
#: The keywords the report gives as a loader's configuration.
CONFIG_KEYS = ("num_workers", "persistent_workers", "prefetch_factor", "pin_memory")


def config_text(config: dict[str, Any]) -> str:
    """A configuration as the report and the status line show it."""
    parts = [f"num_workers={config.get('num_workers')}"]
    if config.get("num_workers"):
        parts.append(f"prefetch_factor={config.get('prefetch_factor') or 2}")
        if config.get("persistent_workers"):
            parts.append("persistent_workers=True")
    if config.get("pin_memory"):
        parts.append("pin_memory=True")
    return ", ".join(parts)


#: Every this many batches (and the first of each pass) a batch is looked at
#: for pinned memory and its size: looking costs microseconds, not nothing.
PIN_EVERY = 64


class LoaderLog:
    """What one DataLoader did: its steps, passes and batches."""

    def __init__(self, index: int, site: tuple[str, int, int], loader: Any) -> None:
        self.index = index
        self.file, self.line, self.end_line = site
        self.cls = f"{type(loader).__module__}.{type(loader).__qualname__}"
        self.config = {key: describe(getattr(loader, key, None)) for key in CONFIG_KEYS}
        try:
            self.length: int | None = len(loader)
        except Exception:  # an IterableDataset without __len__
            self.length = None
        self.batch_size = getattr(loader, "batch_size", None)
        self.dataset = describe(getattr(loader, "dataset", None))
        # Seconds since the monitor started; one entry per closed step.
        self.start = array("d")
        self.dur = array("d")
        self.wait = array("d")
        #: The configuration each step ran under: 0 as written, k the
        #: tuner's k-th candidate, -1 a swap between two of them.
        self.config_id = array("b")
        self.pass_starts: list[int] = []
        self.iterators: list[str] = []
        self.batches = 0
        self.pinned = 0
        self.pageable = 0
        self.batch_bytes: list[int] = []
        self.current_config = 0
        self._open: tuple[float, float, int] | None = None
        self._in_pass = 0

    def new_pass(self, iterator: str) -> None:
        self._open = None
        self._in_pass = 0
        self.pass_starts.append(len(self.start))
        if iterator not in self.iterators:
            self.iterators.append(iterator)

    def called(self, now: float) -> None:
        """A ``next()`` call: it closes the step the previous batch began."""
        if self._open is not None:
            began, waited, config = self._open
            self.start.append(began)
            self.dur.append(now - began)
            self.wait.append(waited)
            self.config_id.append(config)
            self._open = None

    def got(self, began: float, waited: float) -> None:
        self._open = (began, waited, self.current_config)
        self.batches += 1
        self._in_pass += 1

    def should_look(self) -> bool:
        return self._in_pass == 1 or self.batches % PIN_EVERY == 0

    def look(self, batch: Any, pinned_too: bool) -> None:
        """The batch's size and, with an accelerator, whether it arrived pinned."""
        tensors = [leaf for leaf in _leaves(batch) if hasattr(leaf, "is_pinned") and hasattr(leaf, "nbytes")]
        if not tensors:
            return
        try:
            size = sum(int(t.nbytes) for t in tensors)
            pinned = pinned_too and all(t.is_pinned() for t in tensors)
        except Exception:  # a tensor subclass that cannot say
            return
        self.batch_bytes.append(size)
        if not pinned_too:
            return
        if pinned:
            self.pinned += 1
        else:
            self.pageable += 1

    def as_json(self) -> dict[str, Any]:
        return {
            "index": self.index, "file": self.file, "line": self.line, "end_line": self.end_line,
            "class": self.cls, "config": self.config, "len": self.length, "batch_size": self.batch_size,
            "dataset": self.dataset, "batches": self.batches, "iterators": self.iterators,
            "pass_starts": self.pass_starts,
            "steps": [[round(s, 6), round(d, 6), round(w, 6), c]
                      for s, d, w, c in zip(self.start, self.dur, self.wait, self.config_id)],
            "pinned": {"pinned": self.pinned, "pageable": self.pageable,
                       "batch_bytes": sorted(self.batch_bytes)[len(self.batch_bytes) // 2] if self.batch_bytes else None},
        }


def _leaves(obj: Any, depth: int = 0) -> list[Any]:
    if depth > 4:
        return []
    if isinstance(obj, dict):
        return [leaf for value in obj.values() for leaf in _leaves(value, depth + 1)]
    if isinstance(obj, (list, tuple)):
        return [leaf for value in obj for leaf in _leaves(value, depth + 1)]
    return [obj]


class Watched:
    """The iterator handed to the user's loop: the loader's own iterator
    (or the tuner's), timed at each ``next()``."""

    def __init__(self, log: LoaderLog, inner: Any, clock: Callable[[], float], look: bool) -> None:
        self._log = log
        self._inner = inner
        self._clock = clock
        self._look = look
        log.new_pass(getattr(inner, "iterator_name", type(inner).__name__))

    def __iter__(self) -> "Watched":
        return self

    def __len__(self) -> int:
        return len(self._inner)

    def __getattr__(self, name: str) -> Any:
        # Code that reaches into the iterator (``_num_yielded``, ...) still
        # can; a copy being built has no ``_inner`` yet.
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)

    def __next__(self) -> Any:
        log = self._log
        began = self._clock()
        log.called(began)
        batch = next(self._inner)
        log.got(began, self._clock() - began)
        if log.should_look():
            log.look(batch, self._look)
        return batch


class Monitor:
    """The loaders of one process and what was sampled beside them."""

    def __init__(self, *, look_pinned: bool = False) -> None:
        self.origin = time.perf_counter()
        self.wall_origin = time.time()
        self.logs: list[LoaderLog] = []
        self.notes: list[str] = []
        self.look_pinned = look_pinned
        #: Multi-process iterators alive now: their workers are sampled.
        self.live: list[Any] = []
        self.internal = threading.local()
        self.copies: list[tuple[float, int, bool, float, bool]] = []
        #: The sampler's memory samples (the tuner reads the workers' size).
        self.memory: list[dict[str, Any]] = []
        self.tuner: Any = None

    def clock(self) -> float:
        return time.perf_counter() - self.origin

    def register(self, loader: Any, site: tuple[str, int, int]) -> LoaderLog:
        log = LoaderLog(len(self.logs), site, loader)
        self.logs.append(log)
        return log

    def workers(self) -> list[int]:
        """Pids of the DataLoader workers alive now."""
        pids: list[int] = []
        keep = []
        for it in self.live:
            procs = getattr(it, "_workers", None) or []
            alive = [p.pid for p in procs if p.pid is not None and p.is_alive()]
            if alive:
                keep.append(it)
                pids += alive
        self.live = keep
        return pids

    def watch_iterator(self, log: LoaderLog, inner: Any) -> Watched:
        if getattr(inner, "_workers", None) is not None:
            self.live.append(inner)
        return Watched(log, inner, self.clock, self.look_pinned)


def install(torch: Any, monitor: Monitor, tune: Callable[[Any, LoaderLog], Any] | None = None) -> Callable[[], None]:
    """Patch ``DataLoader.__init__`` and ``__iter__``; returns the undo.
    ``tune(loader, log)`` gives the tuner's iterator for a pass, or None
    for the loader's own."""
    DataLoader = torch.utils.data.DataLoader
    original_init, original_iter = DataLoader.__init__, DataLoader.__iter__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if getattr(monitor.internal, "on", False) or "_loadlint_log" in self.__dict__:
            original_init(self, *args, **kwargs)
            return
        site = call_site(self)
        monitor.internal.on = True
        try:
            original_init(self, *args, **kwargs)
        finally:
            monitor.internal.on = False
        try:
            self.__dict__["_loadlint_log"] = monitor.register(self, site)
        except Exception as exc:  # the instrument never fails the script
            monitor.notes.append(f"a DataLoader at {site[0]}:{site[1]} is not monitored: {type(exc).__name__}: {exc}")

    def __iter__(self: Any) -> Any:
        log = self.__dict__.get("_loadlint_log")
        if log is None or getattr(monitor.internal, "on", False):
            return original_iter(self)
        inner = tune(self, log) if tune is not None else None
        return monitor.watch_iterator(log, inner if inner is not None else original_iter(self))

    DataLoader.__init__ = __init__
    DataLoader.__iter__ = __iter__
    monitor.original_iter = original_iter  # type: ignore[attr-defined]

    def undo() -> None:
        DataLoader.__init__ = original_init
        DataLoader.__iter__ = original_iter

    return undo


def copy_hook(monitor: Monitor, original: Callable[..., Any]) -> Callable[..., Any]:
    """``Tensor.to``/``Tensor.cuda`` timed when a CPU tensor goes to a GPU:
    a blocking copy holds the host for its whole duration, so its wall time
    is the copy's (bytes, pinned or pageable, blocking or not)."""

    def hooked(self: Any, *args: Any, **kwargs: Any) -> Any:
        source = getattr(getattr(self, "device", None), "type", None)
        began = time.perf_counter()
        out = original(self, *args, **kwargs)
        if source == "cpu" and getattr(getattr(out, "device", None), "type", None) == "cuda":
            took = time.perf_counter() - began
            try:
                pinned = bool(self.is_pinned())
            except Exception:
                pinned = False
            blocking = not kwargs.get("non_blocking", any(a is True for a in args))
            monitor.copies.append((began - monitor.origin, int(self.nbytes), pinned, took, blocking))
        return out

    return hooked


def pid_memory(pids: list[int]) -> tuple[int, int]:
    """(unique set size, resident size) in bytes summed over ``pids``."""
    import psutil

    uss = rss = 0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            info = proc.memory_full_info()
            uss += int(getattr(info, "uss", 0))
            rss += int(info.rss)
        except (psutil.Error, OSError):
            continue
    return uss, rss


def shm_used(path: str = "/dev/shm") -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize
