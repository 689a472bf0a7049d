"""A thread beside the user's loop: the workers' memory and ``/dev/shm``
every second, NVML utilisation and PCIe receive throughput every 50 ms when
NVIDIA GPUs exist, and the live status line on a terminal."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, TextIO

from loadlint.monitor.instrument import Monitor, pid_memory, shm_used

#: Seconds between samples of the workers' memory (reading /proc costs
#: milliseconds: more often would show in the loop's step time).
MEMORY_EVERY = 1.0
MEMORY_DUTY = 20
#: Seconds between NVML samples (utilisation is averaged by the driver
#: over a period of 1/6 s to 1 s; 50 ms follows a step-scale sawtooth).
GPU_EVERY = 0.05
STATUS_EVERY = 0.5


class Nvml:
    """NVML through ``pynvml``, or nothing: any failure means no GPU sampling."""

    def __init__(self) -> None:
        self.handles: list[Any] = []
        self.name: str | None = None
        self.reason = ""
        try:
            import pynvml

            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            if self.handles:
                name = pynvml.nvmlDeviceGetName(self.handles[0])
                self.name = name.decode() if isinstance(name, bytes) else str(name)
            else:
                self.reason = "NVML found no GPU"
            self._nvml: Any = pynvml
        except Exception as exc:  # no driver, no library, no GPU
            self.reason = f"no NVIDIA GPU ({type(exc).__name__}: {exc})" if str(exc) else "no NVIDIA GPU"
            self.handles = []

    def sample(self) -> tuple[float, float | None] | None:
        """(mean utilisation %, PCIe receive MB/s summed) over the GPUs."""
        if not self.handles:
            return None
        nv = self._nvml
        util = [float(nv.nvmlDeviceGetUtilizationRates(h).gpu) for h in self.handles]
        try:
            # NVML gives KB/s over a 20 ms window.
            rx: float | None = sum(float(nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES)) for h in self.handles) / 1e3
        except Exception:
            rx = None
        return sum(util) / len(util), rx


class Sampler(threading.Thread):
    def __init__(self, monitor: Monitor, status: TextIO | None = None) -> None:
        super().__init__(name="loadlint-monitor", daemon=True)
        self.monitor = monitor
        self.status = status
        self.stop_event = threading.Event()
        self.memory = monitor.memory
        self.gpu: list[tuple[float, float, float | None]] = []
        self.nvml = Nvml()
        self.errors = 0
        self._shown = False

    def run(self) -> None:
        next_memory = next_status = 0.0
        every = GPU_EVERY if self.nvml.handles else min(MEMORY_EVERY, STATUS_EVERY if self.status else MEMORY_EVERY)
        while not self.stop_event.wait(every):
            now = self.monitor.clock()
            try:
                got = self.nvml.sample()
                if got is not None:
                    self.gpu.append((now, got[0], got[1]))
                if now >= next_memory:
                    next_memory = self._memory(now)
                if self.status is not None and now >= next_status:
                    next_status = now + STATUS_EVERY
                    self._status()
            except Exception:  # sampling never fails the run
                self.errors += 1

    def _memory(self, now: float) -> float:
        """One sample of the workers' memory; returns when the next is due.
        Reading many workers' memory takes a CPU share of its own (about
        30 ms a worker on a loaded machine): the samples space out so that
        they take at most 1/MEMORY_DUTY of the time."""
        pids = self.monitor.workers()
        uss, rss = pid_memory(pids) if pids else (0, 0)
        self.memory.append({"t": round(now, 3), "workers": len(pids), "worker_uss": uss, "worker_rss": rss, "shm_used": shm_used()})
        return now + max(MEMORY_EVERY, MEMORY_DUTY * (self.monitor.clock() - now))

    def status_text(self) -> str | None:
        logs = [log for log in self.monitor.logs if len(log.start)]
        if not logs:
            return None
        log = max(logs, key=lambda g: len(g.start))
        n = min(len(log.start), 50)
        dur = sum(log.dur[-n:])
        wait = sum(log.wait[-n:])
        text = f"loadlint monitor: {os.path.basename(log.file)}:{log.line} data wait {wait / dur:.0%}, {n / dur:.1f} batches/s" if dur else None
        if text and self.gpu:
            text += f", GPU {self.gpu[-1][1]:.0f}%"
        tuner = self.monitor.tuner
        if text and tuner is not None and tuner.state_text():
            text += f", {tuner.state_text()}"
        return text

    def _status(self) -> None:
        text = self.status_text()
        if text and self.status is not None:
            self.status.write("\r\x1b[K" + text[:200])
            self.status.flush()
            self._shown = True

    def finish(self) -> None:
        self.stop_event.set()
        self.join(timeout=2.0)
        if self._shown and self.status is not None:
            self.status.write("\r\x1b[K")
            self.status.flush()

    def as_json(self) -> dict[str, Any]:
        return {
            "memory": self.memory,
            "gpu": {"sampled": bool(self.nvml.handles), "name": self.nvml.name, "count": len(self.nvml.handles),
                    "reason": self.nvml.reason or None,
                    "samples": [[round(t, 3), u, None if rx is None else round(rx, 3)] for t, u, rx in self.gpu]},
        }


def status_stream() -> TextIO | None:
    """stderr when it is a terminal: the live line never goes to a pipe."""
    try:
        return sys.stderr if sys.stderr is not None and os.isatty(sys.stderr.fileno()) else None
    except (OSError, ValueError, AttributeError):
        return None

