"""Every bundled example runs under ``loadlint verify`` on a CPU-only
machine with nothing but torch and numpy (the ``verify`` extra): no GPU, no
torchvision, no data folder.  Slow: each runs the example for real."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="loadlint verify needs torch")
pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parent.parent


def verify(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": "", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "loadlint", "verify", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.fixture
def examples(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    return tmp_path


@pytest.mark.parametrize("script, cwd", [("examples/train_cpu.py", "."), ("train.py", "examples/modular")])
def test_single_process_examples_reach_a_verdict(script, cwd, examples):
    proc = verify(["--budget", "20", "--no-tune", script], examples / cwd)
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output and "loadlint: error" not in output, output
    assert "\nverdict: " in proc.stdout, output


def test_the_ddp_example_gets_its_verdict_on_two_cpu_ranks(examples):
    proc = verify(["--nproc", "2", "examples/train_ddp.py"], examples)
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output and "AssertionError" not in output, output
    assert "gloo on loopback" in proc.stdout
    # The example's bug: no DistributedSampler, every rank sees every sample.
    assert "  FAIL  ranks overlap: ranks 0 and 1 share 512 of 512 indices in epoch 1" in proc.stdout, output
    assert "\nverdict: FAIL" in proc.stdout
