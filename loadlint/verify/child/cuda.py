"""The CUDA and NVML paths: GPU utilisation sampled on a thread, and
host-to-device bandwidth pageable against pinned."""

from __future__ import annotations

import threading
import time
from typing import Any

from loadlint.verify.child.identity import flat
from loadlint.verify.child.loaders import make_loader

now = time.perf_counter

#: Seconds between two NVML utilisation samples.
SAMPLE_S = 0.05


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
        while not self._stop.wait(SAMPLE_S):
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


class GpuStep:
    """``--step-ms`` on a CUDA machine: a simulated training step that keeps
    the GPU busy (one spinning kernel, ``torch.cuda._sleep``) and waits for
    it, as a real step's ``loss.item()`` would, so that NVML sees a GPU that
    starves between steps when the loader is slow."""

    def __init__(self, torch: Any, seconds: float) -> None:
        self.torch = torch
        torch.cuda._sleep(1000)  # the context and the kernel's first launch
        torch.cuda.synchronize()
        cycles = 10_000_000
        t0 = now()
        torch.cuda._sleep(cycles)
        torch.cuda.synchronize()
        self.cycles = max(1, int(cycles * seconds / max(now() - t0, 1e-6)))

    def __call__(self) -> None:
        self.torch.cuda._sleep(self.cycles)
        self.torch.cuda.synchronize()


def h2d_bandwidth(torch: Any, arguments: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """Host-to-device GB/s for one real batch, pageable vs pinned, each
    copied with ``non_blocking=True`` as the training loop should."""
    from torch.utils.data._utils.pin_memory import pin_memory

    # Unpinned on purpose: the pageable figure must not inherit the call's
    # own pin_memory=True.
    loader = make_loader(torch, arguments, dict(config, num_workers=0, pin_memory=False))
    it = iter(loader)
    batch = next(it)
    del it
    out = {}
    for name, b in (("pageable", batch), ("pinned", pin_memory(batch))):
        leaves = [x for x in flat(b) if torch.is_tensor(x)]
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
