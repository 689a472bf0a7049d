"""Record PyTorch profiler traces of small training loops, in the shapes
`loadlint trace` diagnoses: a loader that starves the GPU, a healthy one,
pageable blocking copies, workers restarted at every epoch, and two ranks of
which one waits longer on its data. Each case writes one Kineto trace
(gzipped Chrome-trace JSON) named after it.

    python benchmarks/record_gpu_traces.py OUT_DIR [--cases slow0,healthy,...]

On a machine without CUDA the same loops run on the CPU (traces without GPU
events), which is how the script itself is checked.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
from torch.utils.data import DataLoader, Dataset

CASES = ("slow0", "healthy", "pageable_sync", "epochs", "ranks")


class Decoded(Dataset):
    """Image-sized items whose making costs `work_ms` of CPU (a stand-in for
    decoding and augmenting)."""

    def __init__(self, n: int, work_ms: float, size: int = 64) -> None:
        self.n, self.work_ms, self.size = n, work_ms, size

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        # Plain Python work, as a decoder's: no torch operator for the profiler to record.
        end = time.perf_counter() + self.work_ms / 1000
        acc = i
        while time.perf_counter() < end:
            acc = (acc * 1103515245 + 12345) % 2**31
        image = torch.rand(3, self.size, self.size, generator=torch.Generator().manual_seed(acc))
        return image, i % 10


def model_on(device: torch.device) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
    ).to(device)


def train(loader, device, steps: int, prof, *, non_blocking: bool, sync: bool, epochs: int = 1,
          barrier: bool = False) -> None:
    model = model_on(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    done = 0
    for _ in range(epochs):
        for x, y in loader:
            x = x.to(device, non_blocking=non_blocking)
            y = y.to(device, non_blocking=non_blocking)
            if sync and device.type == "cuda":
                torch.cuda.synchronize()
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if barrier:
                dist.barrier()
            prof.step()
            done += 1
            if epochs == 1 and done >= steps:
                return


def export(prof, out: Path, name: str) -> None:
    raw = out / f"{name}.json"
    prof.export_chrome_trace(str(raw))
    with open(raw, "rb") as src, gzip.open(out / f"{name}.json.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()


def activities(device: torch.device) -> list:
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])


def run_case(case: str, out: Path, device: torch.device) -> None:
    acts = activities(device)
    if case == "slow0":
        # As most tutorials write it: no workers, no pinning, blocking copies.
        loader = DataLoader(Decoded(512, work_ms=2.0), batch_size=32, shuffle=True)
        with profile(activities=acts, schedule=schedule(wait=1, warmup=1, active=8)) as prof:
            train(loader, device, 10, prof, non_blocking=False, sync=False)
        export(prof, out, case)
    elif case == "healthy":
        loader = DataLoader(Decoded(2048, work_ms=2.0), batch_size=32, shuffle=True, num_workers=8,
                            pin_memory=True, persistent_workers=True, prefetch_factor=4)
        with profile(activities=acts, schedule=schedule(wait=4, warmup=2, active=8),
                     with_stack=True) as prof:
            train(loader, device, 14, prof, non_blocking=True, sync=False)
        export(prof, out, case)
    elif case == "pageable_sync":
        loader = DataLoader(Decoded(1024, work_ms=0.5, size=256), batch_size=64, num_workers=4)
        with profile(activities=acts, schedule=schedule(wait=2, warmup=1, active=8)) as prof:
            train(loader, device, 11, prof, non_blocking=False, sync=True)
        export(prof, out, case)
    elif case == "epochs":
        # Workers not persistent: started again at every epoch.
        loader = DataLoader(Decoded(192, work_ms=1.0), batch_size=32, num_workers=4, pin_memory=True)
        with profile(activities=acts) as prof:
            train(loader, device, 0, prof, non_blocking=True, sync=False, epochs=3)
        export(prof, out, case)
    elif case == "ranks":
        rank_dir = out / "ranks"
        rank_dir.mkdir(exist_ok=True)
        code = [sys.executable, __file__, str(rank_dir), "--rank-worker"]
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533", WORLD_SIZE="2")
        import subprocess

        procs = [subprocess.Popen(code, env={**os.environ, "RANK": str(r)}) for r in range(2)]
        if any(p.wait(timeout=300) for p in procs):
            raise SystemExit("ranks case failed")


def rank_worker(out: Path, device: torch.device) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    # Rank 1's items cost four times rank 0's: it waits on its data, rank 0 on the barrier.
    loader = DataLoader(Decoded(512, work_ms=0.5 if rank == 0 else 2.0), batch_size=32,
                        num_workers=2, pin_memory=device.type == "cuda", persistent_workers=True)
    with profile(activities=activities(device), schedule=schedule(wait=2, warmup=1, active=6),
                 on_trace_ready=tensorboard_trace_handler(str(out), worker_name=f"rank{rank}",
                                                          use_gzip=True)) as prof:
        train(loader, device, 9, prof, non_blocking=True, sync=False, barrier=True)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--rank-worker", action="store_true")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.rank_worker:
        rank_worker(out, device)
        return
    for case in args.cases.split(","):
        t0 = time.perf_counter()
        run_case(case, out, device)
        print(f"{case}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
