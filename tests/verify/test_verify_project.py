"""verify starts from the project's findings: in ``examples/modular`` the
script builds its loaders in ``data_setup.py``, whose LL204 only the
project analysis finds; verify measures that call, with the
``persistent_workers`` the project's fix writes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from loadlint.types import HardwareProfile
from loadlint.verify.adapters import finding_sites, suggested_config
from loadlint.verify.child.capture import matches_target

REPO = Path(__file__).resolve().parents[2]
MODULAR = REPO / "examples" / "modular"
CURRENT = {"num_workers": 2, "prefetch_factor": None, "persistent_workers": False, "pin_memory": True,
           "multiprocessing_context": None, "timeout": 0, "in_order": True, "pin_memory_device": ""}


def test_finding_sites_hold_the_project_phase_findings():
    sites = finding_sites(str(MODULAR / "train.py"))
    assert sites is not None
    assert sites[str(MODULAR / "data_setup.py")] == [39, 40]
    assert sites[str(MODULAR / "train.py")] == [16]


def test_the_loader_built_in_an_imported_module_is_the_target():
    sites = {str(MODULAR / "data_setup.py"): [39, 40]}
    state = SimpleNamespace(spec={"target": {"at": None, "finding_sites": sites, "file": str(MODULAR / "train.py")}})
    built = {"file": str(MODULAR / "data_setup.py"), "line": 39, "end_line": 39}
    assert matches_target(state, built)
    assert not matches_target(state, {**built, "line": 12, "end_line": 12})
    assert not matches_target(state, {**built, "file": str(MODULAR / "engine.py")})


@pytest.mark.slow  # two project runs over the repository around the example
def test_the_suggestion_carries_the_project_fix():
    profile = HardwareProfile(usable_cpus=2, gpu_count=0)
    path = str(MODULAR / "data_setup.py")
    config, origin = suggested_config(path, 39, profile, dict(CURRENT), cuda=False, project=str(MODULAR))
    assert origin == "loadlint fix"
    assert (config["num_workers"], config["persistent_workers"]) == (2, True)
    # The file alone knows no epoch loop: no persistent workers then.
    alone, _ = suggested_config(path, 39, profile, dict(CURRENT), cuda=False)
    assert alone["persistent_workers"] is False


@pytest.mark.slow
@pytest.mark.torch
def test_verify_measures_the_project_finding(tmp_path):
    pytest.importorskip("torch", reason="loadlint verify needs torch")
    shutil.copytree(MODULAR, tmp_path / "modular")
    env = {**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": "", "NO_COLOR": "1",
           "LOADLINT_VERIFY_MIN_SECONDS": "0.25", "LOADLINT_VERIFY_MIN_BATCHES": "6"}
    proc = subprocess.run(
        [sys.executable, "-m", "loadlint", "verify", "--budget", "10", "--no-tune", "--repeats", "3",
         "--output-format", "json", "train.py"],
        cwd=tmp_path / "modular", env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode in (0, 1), proc.stderr
    rep = json.loads(proc.stdout)
    site = rep["call_sites"][0]
    assert (os.path.basename(site["file"]), site["line"]) == ("data_setup.py", 39)
    suggested = next(c for c in site["candidates"] if c["name"] == "suggested")
    assert suggested["config"]["persistent_workers"] is True
    assert not any("no loader with a static finding" in note for note in rep["notes"])
