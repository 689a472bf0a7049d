"""What ``loadlint verify`` finds by default, and how often it is wrong.

Part 1 runs the default ``loadlint verify`` (adaptive search, paired rounds)
on the two fixture datasets of the verify tests, on the machine as it is
("quiet") and with a process burning one of the usable CPUs ("loaded"), and
prints side by side: the configuration found, its speedup with the 95 %
interval, the machine's ceiling, the wall time and the verdict:

    dataset    load    found                     speedup  interval     ceiling  wall  verdict
    CPU-bound  quiet   num_workers=2             1.84x    1.79-1.90x   2.0x     88s   confirmed
    I/O-bound  loaded  num_workers=8, ...        8.10x    7.71-8.52x   2.0x     89s   confirmed

Part 2 is the A/A test: the configuration as written measured against
itself (``--aa``), TRIALS times quiet and TRIALS times loaded, alternating
the two datasets. A sound decision rule gives zero confirmed and zero
refuted verdicts. Not a test: the numbers belong to the machine it runs on
(the load average is printed beside each row).

    python benchmarks/verify_speedup.py [--budget 90] [--trials 30] [--skip-aa] [--skip-speedup]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "verify" / "fixtures"
ENTRY = "from loadlint.verify.command import verify; verify(prog_name='loadlint verify')"

CASES = [
    ("CPU-bound", "cpu_bound.py", ["--items", "4096", "--work", "6000"]),
    ("I/O-bound", "io_bound.py", ["2"]),
]
#: The A/A trials use the same datasets, smaller, with shorter runs: the
#: question is how often noise alone reaches a verdict, not the rate.
AA_CASES = [
    ("CPU-bound", "cpu_bound.py", ["--items", "1024", "--work", "3000"]),
    ("I/O-bound", "io_bound.py", ["1"]),
]


class Burner:
    """A process that keeps the last usable CPU busy while it lives."""

    def __init__(self, on: bool) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        if on:
            cpu = max(os.sched_getaffinity(0))
            code = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True:\n    pass\n"
            self.proc = subprocess.Popen([sys.executable, "-c", code])

    def __enter__(self) -> "Burner":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def verify(script: str, args: list[str], *options: str) -> tuple[dict[str, Any], float]:
    cmd = [sys.executable, "-c", ENTRY, "--output-format", "json", *options,
           str(FIXTURES / script), "--", *args]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if proc.returncode not in (0, 1):  # 1: refuted or contended (an answer)
        raise SystemExit(f"verify failed on {script}: {proc.stderr.strip().splitlines()[-1]}")
    return json.loads(proc.stdout), time.monotonic() - t0


def load_average() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def speedups(budget: float) -> None:
    head = (f"{'dataset':<10} {'load':<7} {'loadavg':>7}  {'found':<48} {'speedup':>8} "
            f"{'interval':>12} {'ceiling':>8} {'wall':>5}  verdict")
    print(head)
    for name, script, args in CASES:
        for loaded in (False, True):
            before = load_average()
            with Burner(loaded):
                rep, wall = verify(script, args, "--budget", f"{budget:g}")
            site = rep["call_sites"][0]
            d = site.get("decision") or {}
            found = ", ".join(f"{k}={v}" for k, v in site["best"].items()) or "as written"
            if site["verdict"] != "confirmed" and site.get("compared"):
                other = next(c for c in site["candidates"] if c["name"] == site["compared"])
                found = f"as written (best other: nw={other['config'].get('num_workers')})"
            sp = f"{site['speedup']:.2f}x" if site.get("speedup") else "-"
            iv = f"{d['interval'][0]:.2f}-{d['interval'][1]:.2f}x" if d.get("interval") else "-"
            print(f"{name:<10} {'loaded' if loaded else 'quiet':<7} {before:>7}  {found:<48} "
                  f"{sp:>8} {iv:>12} {rep['ceiling']['max_speedup']:>7.1f}x {wall:>4.0f}s  "
                  f"{site['verdict']}", flush=True)
    print("ceiling: the usable CPUs bound CPU-bound loading; I/O-bound loading waits, so it "
          "can exceed it. loaded: a process burning one CPU throughout.")


def aa(trials: int) -> None:
    print(f"\nA/A: the configuration as written against itself, {trials} trials per row "
          "(datasets alternating; 6 paired rounds of 0.5 s runs)")
    print(f"{'load':<7} {'loadavg':>7} {'confirmed':>9} {'refuted':>8} {'inconclusive':>12} "
          f"{'contended':>9} {'wall':>6}")
    for loaded in (False, True):
        counts: Counter[str] = Counter()
        before = load_average()
        t0 = time.monotonic()
        with Burner(loaded):
            for i in range(trials):
                _, script, args = AA_CASES[i % len(AA_CASES)]
                rep, _ = verify(script, args, "--aa", "--repeats", "6", "--min-seconds", "0.5")
                counts[rep["call_sites"][0]["verdict"]] += 1
        print(f"{'loaded' if loaded else 'quiet':<7} {before:>7} {counts['confirmed']:>9} "
              f"{counts['refuted']:>8} {counts['inconclusive']:>12} {counts['contended']:>9} "
              f"{time.monotonic() - t0:>5.0f}s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=90.0)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--skip-aa", action="store_true")
    parser.add_argument("--skip-speedup", action="store_true")
    opts = parser.parse_args()
    if not opts.skip_speedup:
        speedups(opts.budget)
    if not opts.skip_aa:
        aa(opts.trials)


if __name__ == "__main__":
    main()
