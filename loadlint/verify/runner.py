"""Parent side of a verify run: start the shim in a subprocess, watch its
heartbeat, and make sure that every process it started is gone when we
return, on success, timeout, crash and Ctrl-C alike.

Two nets catch the processes: the child leads a new process group (its
DataLoader workers inherit it), and it carries a random token in its
environment that every descendant inherits, including those that leave the
group (``torch.distributed.run`` starts each rank in a new session). After
the group is killed, a sweep of ``/proc`` kills whatever still carries the
token.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

TOKEN_ENV = "LOADLINT_VERIFY_TOKEN"
BOOT = str(Path(__file__).with_name("_boot.py"))


@dataclass
class Outcome:
    """How one subprocess ended. ``status`` is ``ok`` (a result file was
    written), ``hung`` (no progress for ``timeout`` seconds), ``died`` (it
    exited without a result) or ``interrupted``."""

    status: str
    result: dict[str, Any] | None = None
    returncode: int | None = None
    phase: str | None = None
    log: str = ""
    elapsed: float = 0.0
    results: list[dict[str, Any]] = field(default_factory=list)

    def log_tail(self, lines: int = 5) -> str:
        return "\n".join(self.log.strip().splitlines()[-lines:])


class Workdir:
    """A temporary directory for specs, results and logs."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="loadlint-verify-")
        self.path = Path(self._tmp.name)
        self._n = 0

    def new(self, stem: str) -> Path:
        self._n += 1
        return self.path / f"{self._n:03d}-{stem}"

    def close(self) -> None:
        self._tmp.cleanup()


def python_command(spec_path: Path) -> list[str]:
    return [sys.executable, BOOT, str(spec_path)]


def torchrun_command(spec_path: Path, nproc: int) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={nproc}", "--max_restarts=0", BOOT, str(spec_path)]


def run_shim(spec: dict[str, Any], workdir: Workdir, *, timeout: float,
             show_output: bool = False, nproc: int | None = None,
             env: dict[str, str] | None = None,
             on_progress: Callable[[dict[str, Any]], None] | None = None) -> Outcome:
    base = workdir.new(spec["mode"])
    base.mkdir()
    spec = dict(spec)
    spec["out"] = str(base / ("rank{rank}.json" if nproc else "result.json"))
    spec["progress"] = str(base / "progress.json")
    spec_path = base / "spec.json"
    spec_path.write_text(json.dumps(spec))
    cmd = torchrun_command(spec_path, nproc) if nproc else python_command(spec_path)
    token = uuid.uuid4().hex
    child_env = dict(os.environ)
    child_env.update(env or {})
    child_env[TOKEN_ENV] = token
    log_path = base / "output.log"
    started = time.monotonic()
    with open(log_path, "wb") as log:
        out = sys.stderr if show_output else log
        proc = subprocess.Popen(cmd, cwd=spec.get("cwd") or None, env=child_env,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        status = "ok"
        try:
            status = _watch(proc, Path(spec["progress"]), timeout, started, on_progress)
        except KeyboardInterrupt:
            status = "interrupted"
        finally:
            cleanup(proc, token)
    outcome = Outcome(status=status, returncode=proc.returncode,
                      elapsed=time.monotonic() - started)
    outcome.log = log_path.read_text(errors="replace") if not show_output else ""
    try:
        outcome.phase = json.loads(Path(spec["progress"]).read_text()).get("phase")
    except (OSError, ValueError):
        outcome.phase = None
    if nproc:
        for path in sorted(base.glob("rank*.json")):
            outcome.results.append(json.loads(path.read_text()))
        outcome.result = outcome.results[0] if outcome.results else None
    else:
        try:
            outcome.result = json.loads(Path(spec["out"]).read_text())
        except (OSError, ValueError):
            outcome.result = None
    if status == "ok" and outcome.result is None:
        outcome.status = "died"
    if status == "interrupted":
        raise KeyboardInterrupt
    return outcome


def _watch(proc: subprocess.Popen[bytes], progress: Path, timeout: float, started: float,
           on_progress: Callable[[dict[str, Any]], None] | None = None) -> str:
    """Wait for the child; ``hung`` once neither it nor its heartbeat has
    moved for ``timeout`` seconds. Each new heartbeat goes to ``on_progress``."""
    seen = 0.0
    while True:
        try:
            proc.wait(timeout=0.2)
            return "ok"
        except subprocess.TimeoutExpired:
            pass
        try:
            mtime = progress.stat().st_mtime
            last = max(mtime - (time.time() - time.monotonic()), started)
        except OSError:
            mtime, last = 0.0, started
        if on_progress is not None and mtime > seen:
            seen = mtime
            try:
                on_progress(json.loads(progress.read_text()))
            except (OSError, ValueError):
                pass
        if time.monotonic() - last > timeout:
            return "hung"


def cleanup(proc: subprocess.Popen[bytes], token: str, grace: float = 2.0) -> None:
    """Terminate the child's process group, then everything carrying the
    token; escalate to SIGKILL after ``grace`` seconds."""
    pgid = proc.pid
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if proc.poll() is not None and not _group_alive(pgid) and not find_tokened(token):
            break
        time.sleep(0.05)
    _signal_group(pgid, signal.SIGKILL)
    for pid in find_tokened(token):
        _kill(pid, signal.SIGKILL)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    end = time.monotonic() + 5
    while find_tokened(token) and time.monotonic() < end:
        time.sleep(0.05)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def find_tokened(token: str) -> list[int]:
    """Live processes (zombies excluded) whose environment holds the token."""
    needle = f"{TOKEN_ENV}={token}".encode()
    me = os.getpid()
    found: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read()
            if needle not in env:
                continue
            with open(f"/proc/{entry}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in (b"Z", b"X"):
            found.append(int(entry))
    return found
