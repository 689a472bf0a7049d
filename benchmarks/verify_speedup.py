"""Measured speedup vs the machine's ceiling, CPU-bound and I/O-bound.

Runs ``loadlint verify`` on the two fixture datasets of the verify tests,
with the product's default protocol (5 repeats, runs of at least 2 s,
contention gate on), and prints one table:

    dataset     config          speedup   ceiling   verdict
    CPU-bound   num_workers=2   1.85x     2.0x      confirmed
    I/O-bound   num_workers=4   3.70x     2.0x      confirmed

The CPU-bound speedup cannot beat the ceiling (usable CPUs); the I/O-bound
one can, because its workers wait rather than compute. Not a test: the
numbers belong to the machine it runs on.

    python benchmarks/verify_speedup.py [--repeats 5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "verify" / "fixtures"
ENTRY = "from loadlint.verify.command import verify; verify(prog_name='loadlint verify')"

CASES = [
    ("CPU-bound", "cpu_bound.py", ["--items", "4096", "--work", "6000"], "num_workers=2"),
    ("I/O-bound", "io_bound.py", ["2"], "num_workers=4"),
]


def measure(script: str, args: list[str], config: str, repeats: int, quick: bool) -> dict:
    cmd = [sys.executable, "-c", ENTRY, "--output-format", "json", "--repeats", str(repeats),
           "--try", config, str(FIXTURES / script), "--", *args]
    if quick:
        cmd[3:3] = ["--min-seconds", "0.5", "--min-batches", "10"]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"verify failed on {script}: {proc.stderr.strip().splitlines()[-1]}")
    return json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="shorter runs (less trustworthy)")
    opts = parser.parse_args()
    rows = []
    for name, script, args, config in CASES:
        t0 = time.monotonic()
        rep = measure(script, args, config, opts.repeats, opts.quick)
        site = rep["call_sites"][0]
        cand = next(c for c in site["candidates"] if c["name"] == "try")
        cur = site["candidates"][0]
        speed = (cand["decision"] or {}).get("speedup")
        rows.append((name, config, speed, rep["ceiling"]["usable_cpus"],
                     cand["decision"]["verdict"] if cand["decision"] else "-",
                     cur["n"], cand["n"], cur["spread"], time.monotonic() - t0))
    print(f"{'dataset':<10} {'config':<14} {'speedup':>8} {'ceiling':>8}  {'verdict':<12} "
          f"{'n':>5} {'spread':>7} {'took':>6}")
    for name, config, speed, usable, verdict, n0, n1, spread, took in rows:
        sp = f"{speed:.2f}x" if speed else "-"
        sd = f"{spread:.1%}" if spread is not None else "-"
        print(f"{name:<10} {config:<14} {sp:>8} {float(usable):>7.1f}x  {verdict:<12} "
              f"{n0}/{n1:<3} {sd:>7} {took:>5.0f}s")
    print(f"ceiling: at most {float(rows[0][3]):.1f}x on {rows[0][3]} usable CPUs for CPU-bound "
          "loading; I/O-bound loading waits, so it can exceed it")


if __name__ == "__main__":
    main()
