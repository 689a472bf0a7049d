"""Shared helpers for the adversarial tests: the real command line in a
subprocess, and the engine's options with a fixed hardware profile.

Helpers are fixtures (test modules are imported with importlib, so they
cannot import this file).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loadlint.types import Options
from loadlint.rules import CODES
from loadlint.types import HardwareProfile

#: A declared machine, so findings and fixes never depend on the test host.
TARGET = "cpus=4,gpus=1"
PROFILE = HardwareProfile(usable_cpus=4, gpu_count=1, declared=frozenset({"cpus", "gpus"}))


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOADLINT_")}
    env["NO_COLOR"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


class Cli:
    """Runs ``python -m loadlint`` and checks the promises every run keeps:
    no traceback, a documented exit code, not killed by a signal."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd

    def run(self, *args: str, ok=(0, 1), cwd: Path | None = None, timeout: float = 180, stdin: bytes | None = None,
            console_script: bool = False, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        command = [str(Path(sys.executable).with_name("loadlint"))] if console_script else [sys.executable, "-m", "loadlint"]
        proc = subprocess.run(
            [*command, *args],
            cwd=cwd or self.cwd,
            input=stdin,
            capture_output=True,
            timeout=timeout,
            env={**cli_env(), **(env or {})},
        )
        stderr = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode >= 0, f"killed by signal {-proc.returncode}: {stderr[-2000:]}"
        assert "Traceback" not in stderr, stderr[-4000:]
        assert proc.returncode in ok, f"exit {proc.returncode} not in {ok}: {stderr[-2000:]}"
        return proc

    def json(self, *args: str, **kw) -> list[dict]:
        """Findings of a check as JSON (``--output-format json``)."""
        proc = self.run(*args, "--output-format", "json", **kw)
        return json.loads(proc.stdout.decode("utf-8"))


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


@pytest.fixture
def options() -> Options:
    return Options(select=frozenset(CODES), profile_factory=lambda: PROFILE)

