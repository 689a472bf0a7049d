"""Keep, from the stream of trace events, the few a loader diagnosis needs,
as small tuples: steps, DataLoader ``__next__`` spans, device activity,
host-to-device copies, the CUDA runtime calls that copy or synchronise,
and (``with_stack=True``) the Python frames around ``__next__``/``__iter__``."""

from __future__ import annotations

from dataclasses import dataclass, field
from math import isfinite
from pathlib import Path
from typing import Any

from loadlint.trace.stream import MAX_KEPT_EVENTS, TraceError, read_events

#: How often (in events read) the kept events are counted against their cap.
KEPT_CHECK_EVERY = 1 << 16

KNOWN_SCHEMAS = frozenset({1})
DATALOADER_PREFIX = "enumerate(DataLoader)#"
_GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"})
_RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "cuda_sync"})
_RUNTIME_NAMES = frozenset({
    "cudaMemcpy", "cudaMemcpyAsync", "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
})
#: The longest name kept (a frame's "file(line): function", an iterator
#: class): longer ones are no real frame or class, and kept by the thousand
#: they would hold gigabytes.
MAX_KEPT_NAME = 4096
#: The most characters of distinct names kept from one trace.
MAX_NAME_CHARS = 64 << 20
#: Event categories of accelerators this reader does not measure.
_OTHER_ACCELERATORS = (("mtia", "MTIA"), ("xpu", "Intel XPU"), ("hpu", "Gaudi HPU"), ("xla", "XLA/TPU"))


@dataclass
class Copy:
    """One host-to-device copy on the device."""

    ts: float
    dur: float
    nbytes: int
    pinned: bool
    correlation: int | None


@dataclass
class Events:
    """What one trace file holds, reduced."""

    path: Path
    header: dict[str, Any] = field(default_factory=dict)
    #: (ts, dur, step number) of ``ProfilerStep#N``
    steps: list[tuple[float, float, int]] = field(default_factory=list)
    #: (ts, dur, iterator class) of ``enumerate(DataLoader)#<class>.__next__``
    loader: list[tuple[float, float, str]] = field(default_factory=list)
    #: (start, end) of kernels, copies and memsets on the device
    device: list[tuple[float, float]] = field(default_factory=list)
    device_ids: set[int] = field(default_factory=set)
    copies: list[Copy] = field(default_factory=list)
    #: (ts, dur, name, correlation, tid) of copy/synchronise runtime calls
    runtime: list[tuple[float, float, str, int | None, int]] = field(default_factory=list)
    #: (ts, end, tid, "file(line): function") of Python frames (with_stack)
    frames: list[tuple[float, float, int, str]] = field(default_factory=list)
    hip: bool = False
    other_accelerator: str | None = None
    events: int = 0
    #: Each distinct kept name once (a frame repeats every step), and their length together.
    names: dict[str, str] = field(default_factory=dict, repr=False)
    name_chars: int = 0

    def held(self) -> int:
        """How many events are kept for the diagnosis."""
        return len(self.device) + len(self.copies) + len(self.frames) + len(self.steps) + len(self.loader) + len(self.runtime)

    def kept(self, name: str) -> str:
        """``name``, held once however often it comes; TraceError past ``MAX_NAME_CHARS``."""
        held = self.names.get(name)
        if held is None:
            self.name_chars += len(name)
            if self.name_chars > MAX_NAME_CHARS:
                raise TraceError(f"{self.path}: the trace's frame and iterator names are longer than {MAX_NAME_CHARS:,} "
                                 "characters together (the most loadlint keeps)")
            held = self.names[name] = name
        return held

    def add(self, event: dict[str, Any]) -> None:
        self.events += 1
        if not self.events % KEPT_CHECK_EVERY and self.held() > MAX_KEPT_EVENTS:
            raise TraceError(f"{self.path}: the trace holds more than {MAX_KEPT_EVENTS:,} events loadlint keeps "
                             "(GPU work, copies, runtime calls, frames, steps); profile fewer steps")
        if event.get("ph") != "X":
            return
        name, cat = event.get("name"), event.get("cat")
        if not isinstance(name, str):
            return
        try:
            ts, dur = float(event["ts"]), float(event.get("dur", 0))
        except (KeyError, TypeError, ValueError, OverflowError):
            return
        if not (isfinite(ts) and isfinite(ts + dur)) or dur < 0:
            return  # no span of time: nothing to measure, and no NaN in the figures
        if cat in _GPU_CATS:
            self.device.append((ts, ts + dur))
            pid = event.get("pid")
            if isinstance(pid, int):
                self.device_ids.add(pid)
            if "HtoD" in name:
                args = _args(event)
                nbytes = args.get("bytes")
                corr = args.get("correlation")
                self.copies.append(Copy(ts, dur, nbytes if isinstance(nbytes, int) else 0, "Pinned" in name, corr if isinstance(corr, int) else None))
        elif cat == "python_function":
            if len(name) > MAX_KEPT_NAME:
                return
            if not name.startswith(("torch/", "<built-in")) or name.endswith((": __next__", ": __iter__")):
                self.frames.append((ts, ts + dur, _int(event.get("tid")), self.kept(name)))
        elif cat == "gpu_user_annotation":
            return  # the device's copy of ProfilerStep#N and record_function ranges
        elif name.startswith("ProfilerStep#"):
            number = name[len("ProfilerStep#"):]
            # Python's int() also takes other scripts' digits, and refuses 4,300 of them.
            numbered = number.isascii() and number.isdigit() and len(number) < 19
            self.steps.append((ts, dur, int(number) if numbered else len(self.steps)))
        elif name.startswith(DATALOADER_PREFIX) and name.endswith("__next__") and len(name) <= MAX_KEPT_NAME:
            self.loader.append((ts, dur, self.kept(name[len(DATALOADER_PREFIX):].rpartition(".")[0])))
        elif cat in _RUNTIME_CATS:
            if name.startswith("hip"):
                self.hip = True
            elif name in _RUNTIME_NAMES:
                args = _args(event)
                corr = args.get("correlation")
                self.runtime.append((ts, dur, name, corr if isinstance(corr, int) else None, _int(event.get("tid"))))
            else:
                # Kept, unnamed, so that "right after a copy" means no other call between.
                self.runtime.append((ts, dur, "", None, _int(event.get("tid"))))
        elif isinstance(cat, str) and self.other_accelerator is None:
            lowered = cat.lower()
            self.other_accelerator = next((label for key, label in _OTHER_ACCELERATORS if lowered.startswith(key)), None)


def _args(event: dict[str, Any]) -> dict[str, Any]:
    args = event.get("args")
    return args if isinstance(args, dict) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) else hash(value)


def load(path: Path, *, require_loader: bool = True) -> Events:
    """Read and reduce one trace; TraceError for what cannot be diagnosed
    (``require_loader=False`` measures steps of a trace without DataLoader
    spans, for checks against other tools)."""
    events = Events(path)
    events.header = read_events(path, events.add)
    check_usable(events, require_loader)
    return events


def check_usable(events: Events, require_loader: bool = True) -> None:
    path, header = events.path, events.header
    if "traceEvents" not in header:
        raise TraceError(f"{path}: not a profiler trace (no traceEvents)")
    schema = header.get("schemaVersion")
    if schema is not None and schema not in KNOWN_SCHEMAS:
        raise TraceError(f"{path}: unknown trace schema version {schema!r} (loadlint reads Kineto schema 1)")
    if events.events == 0:
        raise TraceError(f"{path}: the trace has no events")
    if events.hip or any("gcnArchName" in props for props in _properties(header)):
        raise TraceError(f"{path}: a ROCm (HIP) trace: loadlint trace reads CUDA and CPU traces only")
    if events.other_accelerator:
        raise TraceError(f"{path}: an {events.other_accelerator} trace: loadlint trace reads CUDA and CPU traces only")
    if require_loader and not events.loader:
        raise TraceError(
            f"{path}: no DataLoader spans (enumerate(DataLoader)#...__next__): the profiled steps did not iterate a DataLoader"
        )


def _properties(header: dict[str, Any]) -> list[dict[str, Any]]:
    props = header.get("deviceProperties")
    return [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []


def device_name(events: Events) -> str:
    """The device the trace measured: its GPU's name, or "cpu"."""
    if not events.device:
        return "cpu"
    props = _properties(events.header)
    named = [p for p in props if p.get("id") in events.device_ids] or props
    names = sorted({str(p.get("name")) for p in named if p.get("name")})
    return ", ".join(names) if names else "gpu"


def rank_of(events: Events) -> int | None:
    info = events.header.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    return rank if isinstance(rank, int) else None
