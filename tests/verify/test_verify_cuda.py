"""The CUDA and NVML paths: run where a CUDA device is present, skipped
with the reason elsewhere. benchmarks/gpu_check.sh runs the same paths at
full length; without CUDA it must say so and stop."""

from __future__ import annotations

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="loadlint verify needs torch")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA device (run benchmarks/gpu_check.sh on one)")


def test_gpu_check_without_cuda_says_so(vf):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: benchmarks/gpu_check.sh runs in full there")
    proc = subprocess.run(["bash", str(vf.REPO / "benchmarks" / "gpu_check.sh")], cwd=vf.REPO,
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable,
                               "PYTHONPATH": str(vf.REPO)})
    assert proc.returncode == 2
    assert "gpu_check: no CUDA device" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


@needs_cuda
def test_step_ms_on_the_gpu_samples_nvml_and_measures_h2d(vf):
    _, rep = vf.json("benchmarks/gpu_train.py", "--step-ms", "5", "--no-tune", "--repeats", "1",
                     "--", "--items", "256", "--rounds", "2")
    assert rep["cuda"]["measured"] and rep["cuda"]["pinned_gbps"] > 0
    assert rep["gpu"]["sampled"] is True
    cur = rep["call_sites"][0]["candidates"][0]
    assert cur["gpu_util_mean"] is not None and cur["runs"][0]["gpu_series"]


@needs_cuda
def test_in_situ_on_a_cuda_script_samples_nvml(tmp_path, vf):
    plot = tmp_path / "insitu.png"
    _, rep = vf.json("benchmarks/gpu_train.py", "--in-situ", "--repeats", "1", "--steps", "8",
                     "--plot", str(plot), "--", "--items", "256", "--rounds", "2")
    assert rep["gpu"]["sampled"] is True
    assert all(c["gpu_util_mean"] is not None for c in rep["call_sites"][0]["candidates"] if c["n"])
    assert plot.stat().st_size > 1000
