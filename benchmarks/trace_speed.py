"""How fast and how lean ``loadlint trace`` reads a large trace.

    python benchmarks/trace_speed.py [--seed TRACE.json.gz] [--mb 100] [--gzip]

It builds a trace of about ``--mb`` megabytes of JSON by repeating the
events of a seed trace (a real Kineto trace with DataLoader spans, e.g.
Holistic Trace Analysis's ``tests/data/trace_diff/control/control.json.gz``;
without one, a synthetic GPU-shaped trace), each copy shifted in time so
that the steps follow one another, into a work folder outside the
repository (``$LOADLINT_BENCH_DIR``, default ``~/.cache/loadlint-bench``).
Then, side by side in one run, each in a fresh process: ``loadlint trace
--output-format json`` and a plain ``json.load`` of the same file (what a
non-streaming reader pays at least), with wall time and peak RSS, and
their ratios.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _synthetic_events() -> tuple[list[dict], float]:
    events, ts = [], 0.0
    for step in range(50):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1, "ts": ts, "dur": 10000})
        events.append({"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
                       "pid": 1, "tid": 1, "ts": ts + 10, "dur": 3000})
        for k in range(40):
            events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts + 3100 + k * 150, "dur": 100,
                           "args": {"External id": k, "Input Dims": [[64, 64], [64, 64]]}})
            events.append({"ph": "X", "cat": "kernel", "name": "ampere_sgemm_64x64_nn", "pid": 0, "tid": 7, "ts": ts + 3200 + k * 150,
                           "dur": 120, "args": {"device": 0, "stream": 7, "correlation": k, "grid": [8, 1, 1], "block": [128, 1, 1]}})
        events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": ts + 3050,
                       "dur": 40, "args": {"device": 0, "stream": 7, "correlation": 999, "bytes": 1 << 20, "memory bandwidth (GB/s)": 26.2}})
        ts += 10000
    return events, ts


def build(seed: Path | None, megabytes: float, out: Path, compress: bool) -> Path:
    if seed is not None:
        with gzip.open(seed, "rt") if seed.read_bytes()[:2] == b"\x1f\x8b" else seed.open() as f:
            data = json.load(f)
        events = [e for e in data["traceEvents"] if "ts" in e]
        start = min(float(e["ts"]) for e in events)
        span = max(float(e["ts"]) + float(e.get("dur", 0)) for e in events) - start
        header = {k: v for k, v in data.items() if k != "traceEvents"}
    else:
        events, span = _synthetic_events()
        header = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "synthetic GPU"}]}
    target = int(megabytes * 1e6)
    path = out / (f"trace_{megabytes:g}mb.json" + (".gz" if compress else ""))
    if path.exists():
        return path
    opener = gzip.open(path, "wt", encoding="utf-8") if compress else path.open("w", encoding="utf-8")
    written, copy = 0, 0
    with opener as f:
        head = json.dumps(header)[:-1] + ', "traceEvents": ['
        f.write(head)
        first = True
        while written < target:
            shift = copy * (span + 1000.0)
            for e in events:
                moved = dict(e, ts=float(e["ts"]) + shift)
                text = ("" if first else ",\n") + json.dumps(moved)
                first = False
                f.write(text)
                written += len(text)
            copy += 1
        f.write("]}\n")
    return path


def measure(argv: list[str]) -> tuple[float, float, int, float]:
    """(wall seconds, peak RSS in MB, exit code, CPU seconds) of a fresh
    process; CPU time tells a busy machine's waiting from the work."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    code = ("import resource, subprocess, sys, time\n"
            "t = time.perf_counter(); rc = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
            "wall = time.perf_counter() - t\n"
            "use = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "print(wall, use.ru_maxrss, rc, use.ru_utime + use.ru_stime)")
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, check=True).stdout.split()
    return float(out[0]), int(out[1]) / 1024, int(out[2]), float(out[3])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=Path)
    parser.add_argument("--mb", type=float, default=100.0)
    parser.add_argument("--gzip", action="store_true")
    args = parser.parse_args()
    work = Path(os.environ.get("LOADLINT_BENCH_DIR", Path.home() / ".cache" / "loadlint-bench")) / "trace"
    work.mkdir(parents=True, exist_ok=True)
    path = build(args.seed, args.mb, work, args.gzip)
    size = path.stat().st_size / 1e6
    print(f"trace: {path} ({size:.1f} MB on disk{', gzipped' if args.gzip else ''})")
    ours = measure([sys.executable, "-m", "loadlint", "trace", "--output-format", "json", "--exit-zero", str(path)])
    opener = "gzip.open" if args.gzip else "open"
    plain = measure([sys.executable, "-c", f"import gzip, json; json.load({opener}({str(path)!r}, 'rt'))"])
    print(f"{'':<28}{'wall s':>10}{'CPU s':>10}{'peak RSS MB':>14}")
    print(f"{'loadlint trace (streamed)':<28}{ours[0]:>10.2f}{ours[3]:>10.2f}{ours[1]:>14.0f}   exit {ours[2]}")
    print(f"{'json.load of the file':<28}{plain[0]:>10.2f}{plain[3]:>10.2f}{plain[1]:>14.0f}")
    print(f"ratio loadlint/json.load: wall {ours[0] / plain[0]:.2f}x, CPU {ours[3] / plain[3]:.2f}x, peak RSS {ours[1] / plain[1]:.2f}x")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
