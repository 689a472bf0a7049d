"""``loadlint ARGS`` in a child process that reports its own peak memory.

The peak is the child's ``VmHWM`` (the high-water mark of its own address
space), not ``ru_maxrss``: Linux carries the forking process's high-water
mark across ``exec``, so a child of a large pytest worker would report the
worker's memory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = (
    "import atexit, resource, runpy, sys\n"
    "def peak():\n"
    "    try:\n"
    "        with open('/proc/self/status') as status:\n"
    "            return next(int(line.split()[1]) for line in status if line.startswith('VmHWM:'))\n"
    "    except (OSError, StopIteration):\n"
    "        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "atexit.register(lambda: print('PEAK_KB', peak(), file=sys.stderr))\n"
    "sys.argv = ['loadlint', *sys.argv[1:]]\n"
    "runpy.run_module('loadlint', run_name='__main__', alter_sys=True)\n"
)


def high_water_kb(pid: int) -> int:
    """The running process ``pid``'s own peak resident memory in KiB (0 once gone)."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def peak_run(cwd: Path, *args: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess[bytes], int]:
    """The run of ``loadlint ARGS`` in ``cwd`` and its peak resident memory in MiB."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOADLINT_")}
    env["NO_COLOR"] = "1"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, *args], cwd=cwd, capture_output=True, timeout=timeout, env=env)
    stderr = proc.stderr.decode(errors="replace")
    assert "Traceback" not in stderr, stderr[-3000:]
    [peak] = [int(line.split()[1]) for line in stderr.splitlines() if line.startswith("PEAK_KB ")]
    return proc, peak // 1024
