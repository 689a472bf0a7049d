"""``loadlint ARGS`` in a child process that reports its own peak memory.

The peak is the child's ``VmHWM`` (the high-water mark of its own address
space), not ``ru_maxrss``: Linux carries the forking process's high-water
mark across ``exec``, so a child of a large pytest worker would report the
worker's memory."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

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


class Polled(NamedTuple):
    code: int
    out: str
    err: str
    seconds: float
    peak_kb: int
    #: CPU seconds (user and system).
    cpu: float


def polled(command: list[str], cwd: Path, env: dict[str, str], timeout: float, hold_stdin: bool = False) -> Polled:
    """``command`` in ``cwd``, killed at ``timeout`` seconds, its own peak
    memory (``VmHWM``) polled; with ``hold_stdin`` its stdin is a pipe held
    open (a read of /dev/stdin would block), else /dev/null."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        stdin = subprocess.PIPE if hold_stdin else subprocess.DEVNULL
        proc = subprocess.Popen(command, cwd=cwd, stdin=stdin, stdout=out, stderr=err, env=env)
        peak = 0
        try:
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                peak = max(peak, high_water_kb(proc.pid))
                if time.perf_counter() - start > timeout:
                    proc.kill()
                time.sleep(0.01)
        finally:
            if proc.stdin is not None:
                proc.stdin.close()
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        return Polled(os.waitstatus_to_exitcode(status), out.read().decode("utf-8", "replace"),
                      err.read().decode("utf-8", "replace"), seconds, peak, usage.ru_utime + usage.ru_stime)
