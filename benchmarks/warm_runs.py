"""Warm runs on a tree without project markers: the three-wheel corpus.

    python benchmarks/warm_runs.py [--repeat 7] [--against CHECKOUT] [--tree DIR]

The corpus is every ``.py`` file of the lightning, transformers (its
generated ``models/`` folder included: 2,600 files that never mention
``DataLoader``) and timm wheels pinned in ``lint_speed.py``, 3,482 files
with no ``pyproject.toml``, ``setup.py`` or ``.git`` among them: every folder
is a project of its own.  It is fetched once into ``$LOADLINT_BENCH_DIR``
(default ``~/.cache/loadlint-bench``), like ``lint_speed.py``'s, or ``--tree``
names another folder.

Each checkout (this one, and ``--against`` another loadlint checkout, run
with ``PYTHONPATH`` pointing at it) gets a cache of its own, filled by one
cold run; then warm runs of ``loadlint check .`` alternate between the
checkouts, so both see the same load.  It prints the median wall and CPU
time (user + system) of each, their ratio and the load average.  Python
writes bytecode for the runs (as on a user's machine) whatever
``PYTHONDONTWRITEBYTECODE`` says.  Not a test: the figures depend on the
machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import lint_speed  # noqa: E402  (the corpus's pins and fetching)

WHEELS = [spec for spec in lint_speed.PACKAGES if spec.split("==")[0] in ("lightning", "transformers", "timm")]
HERE = Path(__file__).resolve().parent.parent


def corpus(work: Path) -> Path:
    """The three wheels' ``.py`` files, ``transformers/models`` included."""
    tree = work / "three-wheels"
    stamp = tree / ".complete"
    label = "\n".join(WHEELS)
    if stamp.exists() and stamp.read_text() == label:
        return tree
    shutil.rmtree(tree, ignore_errors=True)
    for wheel in lint_speed.fetch(work, WHEELS):
        name = wheel.name.split("-")[0]
        for path, data in lint_speed.wheel_sources(wheel):
            target = tree / name / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    stamp.write_text(label)
    return tree


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run (its children included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"loadlint failed ({done.returncode}): {done.stderr.strip()}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="warm runs per checkout (median)")
    parser.add_argument("--against", type=Path, help="another loadlint checkout to time alternately")
    parser.add_argument("--tree", type=Path, help="measure this folder instead of the three wheels")
    args = parser.parse_args(argv)
    work = Path(os.environ.get("LOADLINT_BENCH_DIR", Path.home() / ".cache" / "loadlint-bench"))
    tree = args.tree.resolve() if args.tree else corpus(work)
    files = sum(1 for _ in tree.rglob("*.py"))
    checkouts = {"this checkout": HERE}
    if args.against:
        checkouts["--against"] = args.against.resolve()
    caches = Path(tempfile.mkdtemp(prefix="loadlint-warm-"))
    try:
        commands = {}
        for number, (label, checkout) in enumerate(checkouts.items()):
            env = dict(os.environ, PYTHONPATH=str(checkout), LOADLINT_CACHE_DIR=str(caches / str(number)))
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            commands[label] = ([sys.executable, "-m", "loadlint", "check", "."], env)
            timed(commands[label][0], tree, env)  # cold: fills the cache (and the bytecode)
        runs: dict[str, list[tuple[float, float]]] = {label: [] for label in commands}
        for _ in range(args.repeat):
            for label, (cmd, env) in commands.items():
                runs[label].append(timed(cmd, tree, env))
    finally:
        shutil.rmtree(caches, ignore_errors=True)
    print(f"tree: {tree} ({files:,} files); load average {os.getloadavg()[0]:.2f}; median of {args.repeat}")
    print("| checkout | warm wall | warm CPU |")
    print("|---|---:|---:|")
    medians = {}
    for label, measured in runs.items():
        wall = statistics.median(w for w, _ in measured)
        cpu = statistics.median(c for _, c in measured)
        medians[label] = (wall, cpu)
        print(f"| {label} ({checkouts[label]}) | {wall:.3f} s | {cpu:.3f} s |")
    if len(medians) == 2:
        (wall_a, cpu_a), (wall_b, cpu_b) = medians.values()
        print(f"this checkout / --against: wall {wall_a / wall_b:.2f}x, CPU {cpu_a / cpu_b:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
