"""What ``loadlint monitor`` (without ``--tune``) adds to a training loop
with 5 ms steps, side by side with the plain run.

The script iterates an in-memory DataLoader (no workers) for N steps of
5 ms each (the host waiting on the device, ``time.sleep``; ``--busy`` for
CPU work instead) and prints the loop's own wall time (start-up left out:
the monitor's cost that grows with the run is what matters).  Plain
``python`` and ``loadlint monitor`` runs alternate (A B, B A, ...) so that
drift on a shared machine falls on both; the overhead is the median of the
paired ratios.  Then, in one process, the instrument's own cost: the same
loader iterated plainly and through the monitor's iterator, passes
alternating, in microseconds per step against the step.

    python benchmarks/monitor_overhead.py [--rounds 5] [--steps 1000] [--step-ms 5] [--busy]

Not a test: the numbers belong to the machine it runs on.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SCRIPT = '''
import sys, time
import torch
from torch.utils.data import DataLoader

steps, step_s, busy = int(sys.argv[1]), float(sys.argv[2]) / 1e3, sys.argv[3] == "busy"


def step():
    if not busy:
        time.sleep(step_s)  # the host waits for the device
        return
    end = time.perf_counter() + step_s
    while time.perf_counter() < end:
        pass


loader = DataLoader(torch.arange(steps * 8, dtype=torch.float32).reshape(steps * 8, 1), batch_size=8)
t0 = time.perf_counter()
for batch in loader:
    step()
print(f"loop {time.perf_counter() - t0:.6f}")
if len(sys.argv) > 4:
    # The instrument alone, in this process: passes alternate plain and watched.
    from loadlint.monitor import watch
    watched = watch(loader)
    costs = {"plain": [], "watched": []}
    for r in range(int(sys.argv[4])):
        for name, it in (("plain", loader), ("watched", watched))[:: 1 if r % 2 == 0 else -1]:
            n, outside, t = 0, 0.0, time.perf_counter()
            for batch in it:
                outside += time.perf_counter() - t  # loading, and the instrument when watched
                step()
                n += 1
                t = time.perf_counter()
            costs[name].append(outside / n)
    import json
    print("inproc " + json.dumps(costs))
'''


def loop_seconds(cmd: list[str], cwd: Path) -> float:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    line = next((l for l in proc.stdout.splitlines() if l.startswith("loop ")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.strip()[-400:]}")
    return float(line.split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--step-ms", type=float, default=5.0)
    parser.add_argument("--busy", action="store_true", help="a step of CPU work instead of a wait")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="monitor-overhead-") as tmp:
        root = Path(tmp)
        (root / "loop.py").write_text(SCRIPT)
        args = ["loop.py", str(opts.steps), str(opts.step_ms), "busy" if opts.busy else "sleep"]
        plain_cmd = [sys.executable, *args]
        monitor_cmd = [sys.executable, "-m", "loadlint", "monitor", "--no-static", "-o", "report.json", args[0], "--", *args[1:]]
        print(f"load average {os.getloadavg()[0]:.2f}; {opts.steps} steps of {opts.step_ms:g} ms; "
              f"{len(os.sched_getaffinity(0))} usable CPUs")
        print(f"{'round':>5}  {'plain s':>9}  {'monitor s':>9}  {'ratio':>7}")
        ratios, plain_s, monitor_s = [], [], []
        for r in range(opts.rounds):
            order = [("plain", plain_cmd), ("monitor", monitor_cmd)]
            got = {name: loop_seconds(cmd, root) for name, cmd in (order if r % 2 == 0 else order[::-1])}
            plain_s.append(got["plain"])
            monitor_s.append(got["monitor"])
            ratios.append(got["monitor"] / got["plain"])
            print(f"{r + 1:>5}  {got['plain']:>9.3f}  {got['monitor']:>9.3f}  {ratios[-1]:>7.4f}", flush=True)
        med = statistics.median(ratios)
        print(f"median loop: plain {statistics.median(plain_s):.3f} s, monitored {statistics.median(monitor_s):.3f} s; "
              f"overhead {100 * (med - 1):+.2f}% (median of the paired ratios); load average {os.getloadavg()[0]:.2f}")
        inproc(root, [sys.executable, *args, str(2 * opts.rounds)], opts)


def inproc(root: Path, cmd: list[str], opts: argparse.Namespace) -> None:
    """The loop's time outside the steps, plain and watched, in one process."""
    import json

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    line = next((l for l in proc.stdout.splitlines() if l.startswith("inproc ")), None)
    if line is None:
        raise SystemExit(f"in-process run failed: {proc.stderr.strip()[-400:]}")
    costs = json.loads(line[len("inproc "):])
    plain, watched = (statistics.median(costs[k]) * 1e6 for k in ("plain", "watched"))
    print(f"in one process, passes alternating: time outside the step per step {plain:.1f} us plain, "
          f"{watched:.1f} us watched: the instrument adds {watched - plain:.1f} us, "
          f"{100 * (watched - plain) / 1e3 / opts.step_ms:.3f}% of a {opts.step_ms:g} ms step")


if __name__ == "__main__":
    main()
