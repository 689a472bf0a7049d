"""In-process cost of checking the editor benchmark's 2,000-line script.

    PYTHONPATH=$PWD python benchmarks/check_cost.py [--runs 5] [--profile]

Prints the median time of ``analyse`` (the findings) and of
``decided_findings`` (the findings with their fixes decided: each
fix is tried on the text and withheld if it would introduce a finding),
all rules selected, on a declared 8-CPU, 2-GPU Linux profile.  With
``--profile``, the 35 costliest calls of one ``decided_findings``.

This is not a test: the numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).parent))

from editor_latency import training_script  # noqa: E402

from loadlint.engine.analysis import analyse  # noqa: E402
from loadlint.engine.decision import decided_findings  # noqa: E402
from loadlint.hardware.detect import HardwareProfile  # noqa: E402
from loadlint.rules import CODES  # noqa: E402
from loadlint.types import Options  # noqa: E402


def median_ms(call: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    profile = HardwareProfile(usable_cpus=8, gpu_count=2, declared=frozenset({"cpus", "gpus", "platform", "python"}))
    options = Options(frozenset(CODES), lambda: profile)
    text = training_script()
    findings = decided_findings(text, "train.py", options)
    analysed = median_ms(lambda: analyse(text, "train.py", options), args.runs)
    decided = median_ms(lambda: decided_findings(text, "train.py", options), args.runs)
    fixes = sum(f.fix is not None for f in findings)
    print(f"{len(text.splitlines())} lines, {len(findings)} findings, {fixes} fixes: "
          f"analyse {analysed:.0f} ms, decided_findings {decided:.0f} ms (medians of {args.runs})")
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(decided_findings, text, "train.py", options)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(35)
    return 0


if __name__ == "__main__":
    sys.exit(main())
