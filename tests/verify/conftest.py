"""Shared helpers for the verify tests: run the command in a subprocess
with the protocol's minimums shrunk so that the suite stays fast."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"

#: Small but still meaningful: 2 s runs and 30 batches are the product's
#: defaults; here a run lasts a fraction of a second.
FAST_ENV = {
    "LOADLINT_VERIFY_MIN_SECONDS": "0.25",
    "LOADLINT_VERIFY_MIN_BATCHES": "6",
    "LOADLINT_VERIFY_WARMUP": "2",
    "LOADLINT_VERIFY_PER_WORKER": "2",
    "LOADLINT_VERIFY_WARMUP_PER_WORKER": "1",
    "LOADLINT_VERIFY_EXTRA_ROUNDS": "0",
}

ENTRY = "from loadlint.verify.command import verify; verify(prog_name='loadlint verify')"


def run_verify(*args: str, env: dict[str, str] | None = None, timeout: float = 300,
               cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **FAST_ENV, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), full_env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", ENTRY, *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def run_json(*args: str, **kw: object) -> tuple[subprocess.CompletedProcess[str], dict]:
    proc = run_verify("--output-format", "json", *args, **kw)  # type: ignore[arg-type]
    assert proc.returncode in (0, 1), proc.stderr  # 1: refuted or contended (exit_status)
    return proc, json.loads(proc.stdout)


def fixture(name: str) -> str:
    return str((FIXTURES / name).relative_to(REPO))


def skip_if_contended(report: dict) -> None:
    site = report["call_sites"][0]
    if site["verdict"] == "contended":
        pytest.skip("the machine was busy with other work during the runs (contended)")


class Verify:
    """What the tests use (the suite runs with --import-mode=importlib, so
    test modules cannot import this file by name)."""

    REPO = REPO
    ENTRY = ENTRY
    FAST_ENV = FAST_ENV
    run = staticmethod(run_verify)
    json = staticmethod(run_json)
    fixture = staticmethod(fixture)
    skip_if_contended = staticmethod(skip_if_contended)


@pytest.fixture
def vf() -> type[Verify]:
    pytest.importorskip("torch", reason="loadlint verify needs torch")
    return Verify
