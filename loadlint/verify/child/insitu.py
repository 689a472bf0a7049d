"""``insitu`` mode: inject one candidate configuration into the target call
and time ``next()`` in the user's own loop for warm-up + N steps."""

from __future__ import annotations

import time
from typing import Any

from loadlint.verify.child.bench import gate_record
from loadlint.verify.child.capture import run_user_code
from loadlint.verify.child.cuda import GpuSampler
from loadlint.verify.child.loaders import shutdown, workers_of
from loadlint.verify.child.probes import WindowMeter, attributable
from loadlint.verify.child.state import State, StopScript

now = time.perf_counter


class TimedIterator:
    """Wraps the target loader's iterator: records when each ``next()``
    was asked for and how long it blocked, and ends the script after the
    measured steps."""

    def __init__(self, inner: Any, box: dict[str, Any]) -> None:
        self.inner = inner
        self.box = box

    def __iter__(self) -> "TimedIterator":
        return self

    def __next__(self) -> Any:
        box = self.box
        t0 = now()
        box["calls"].append(t0)
        if len(box["calls"]) == box["warmup"] + 1:
            box["start"]()
            # The meters' own start-up is not time spent waiting for data:
            # the blocked share must stay within the measured seconds.
            t0 = now()
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


def run_insitu(torch: Any, state: State, profile: Any) -> dict[str, Any]:
    """Run the script with the candidate injected; the timed steps' rate."""
    spec = state.spec
    ins = spec["insitu"]
    DataLoader = torch.utils.data.DataLoader
    original_iter = DataLoader.__iter__
    nw = int(ins["config"].get("num_workers") or 0)
    meter = WindowMeter(profile.usable_cpus, nw + 1, attributable(profile))
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
        meter.sample_workers(workers_of(inner))
        box["t_end"] = now()
        if gpu:
            result["gpu"] = gpu.stop()
        shutdown(state.target_instance, inner)
        result["window"] = meter.stop()

    box["start"], box["finish"] = start, finish

    def __iter__(self: Any) -> Any:
        inner = original_iter(self)
        if self is not state.target_instance:
            return inner
        state.progress("insitu", steps=len(box["calls"]))
        return TimedIterator(inner, box)

    DataLoader.__iter__ = __iter__
    state.stop_on_capture = False
    state.spec["target"] = {"at": ins["call"]}
    outcome = run_user_code(state, spec)
    w, n = box["warmup"], box["steps"]
    calls = box["calls"]
    if "t_end" not in box:
        if len(calls) <= w + 1:
            return {"outcome": outcome, "error": "the script's loop ended during warm-up"
                    if state.target is not None else None}
        # The loop ended early: measure what ran.
        box["t_end"] = calls[-1]
        n = len(calls) - 1 - w
        result["window"] = meter.stop()
        result["short"] = True
    seconds = box["t_end"] - box["t_start"]
    blocked = sum(box["blocked"][w:w + n])
    result.update(outcome=outcome, steps=n, seconds=seconds, blocked_s=blocked,
                  rate=n / seconds if seconds > 0 else 0.0, epochs_seen=box["epochs"] + 1)
    result["gate"] = gate_record(result["window"])
    cpu = result["window"]["our_cpu_s"]
    result["cpu_per_batch"] = cpu / n if n else None
    result["utilisation"] = cpu / result["window"]["wall_s"] if result["window"]["wall_s"] > 0 else None
    return result
