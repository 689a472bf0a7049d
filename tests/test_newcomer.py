"""A newcomer's first hour: portable fixes without a declared target, the
target declared with ``init`` and shown alone by ``hardware --target``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadlint.cli import cli
from loadlint.rules.shared import RANK_WORKERS_CONSTANT, WORKERS_CONSTANT

REPO = Path(__file__).resolve().parent.parent
CLEAN_ENV = {"NO_COLOR": None, "FORCE_COLOR": None, "LOADLINT_OUTPUT_FORMAT": None}

#: LL201 (no workers), LL203 on a literal that only one CPU finds too high,
#: LL203 on ``os.cpu_count()`` under DDP, LL201 on a Trainer.
SINGLE = """\
from torch.utils.data import DataLoader

def main():
    loader = DataLoader(ds, batch_size=32)
    other = DataLoader(ds, batch_size=32, num_workers=2)
    for epoch in range(3):
        for batch in loader:
            step(batch)
        for batch in other:
            step(batch)

if __name__ == "__main__":
    main()
"""
DDP = """\
import os
import torch.distributed as dist
from torch.utils.data import DataLoader

def main():
    dist.init_process_group("gloo")
    loader = DataLoader(ds, sampler=s, batch_size=32, num_workers=os.cpu_count())
    for batch in loader:
        step(batch)

if __name__ == "__main__":
    main()
"""


def invoke(args, cwd: Path):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, args, env=CLEAN_ENV, catch_exceptions=False)
    finally:
        os.chdir(old)


def _project(root: Path) -> Path:
    root.mkdir()
    (root / "single.py").write_text(SINGLE)
    (root / "ddp.py").write_text(DDP)
    return root


@pytest.mark.skipif(shutil.which("taskset") is None or len(os.sched_getaffinity(0)) < 2, reason="needs taskset and 2 CPUs")
def test_fix_is_byte_identical_on_one_and_two_cpus(tmp_path):
    outputs = []
    for cpus in ("0", "0,1"):
        root = _project(tmp_path / f"cpus{cpus.replace(',', '_')}")
        env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
        shown = subprocess.run(
            ["taskset", "-c", cpus, sys.executable, "-m", "loadlint", "hardware"],
            env=env, capture_output=True, text=True, check=True,
        ).stdout
        assert f"usable CPUs:      {len(cpus.split(','))}\n" in shown
        subprocess.run(
            ["taskset", "-c", cpus, sys.executable, "-m", "loadlint", "fix", "--no-cache", "--unsafe-fixes", "-q", "."],
            cwd=root, env=env, capture_output=True, text=True,
        )
        outputs.append({p.name: p.read_bytes() for p in sorted(root.glob("*.py"))})
    assert outputs[0] == outputs[1]
    single = outputs[0]["single.py"].decode()
    assert WORKERS_CONSTANT in single
    assert "DataLoader(ds, batch_size=32, num_workers=LOADER_WORKERS)" in single
    # The literal another machine would keep is left alone.
    assert "DataLoader(ds, batch_size=32, num_workers=2" in single
    assert RANK_WORKERS_CONSTANT in outputs[0]["ddp.py"].decode()


def test_fix_without_target_writes_the_run_time_constant_and_shows_it_first(tmp_path):
    root = _project(tmp_path / "p")
    shown = invoke(["check", "--no-cache", "--select", "LL201", "single.py"], root)
    assert shown.exit_code == 1
    assert (
        "  = help: Set `num_workers=LOADER_WORKERS`, defined after the imports as "
        '`LOADER_WORKERS = max(1, (getattr(os, "process_cpu_count", os.cpu_count)() or 1) - 1)`\n'
    ) in shown.stdout
    fixed = invoke(["fix", "--no-cache", "--select", "LL201", "single.py"], root)
    assert fixed.exit_code == 0, fixed.output
    assert (root / "single.py").read_text() == SINGLE.replace(
        "from torch.utils.data import DataLoader\n",
        f"from torch.utils.data import DataLoader\nimport os\n{WORKERS_CONSTANT}\n",
    ).replace("DataLoader(ds, batch_size=32)", "DataLoader(ds, batch_size=32, num_workers=LOADER_WORKERS)")


def test_fix_with_a_declared_target_writes_its_numbers(tmp_path):
    root = _project(tmp_path / "p")
    fixed = invoke(["fix", "--no-cache", "--select", "LL201,LL203", "--target", "cpus=1,gpus=0", "single.py"], root)
    assert fixed.exit_code == 0, fixed.output
    text = (root / "single.py").read_text()
    assert "DataLoader(ds, batch_size=32, num_workers=1)" in text
    assert "DataLoader(ds, batch_size=32, num_workers=1)\n    for" in text
    assert "LOADER_WORKERS" not in text


def test_oversubscription_without_target_is_reported_but_not_rewritten(tmp_path):
    root = tmp_path
    (root / "m.py").write_text("from torch.utils.data import DataLoader\nloader = DataLoader(ds, num_workers=512)\n")
    result = invoke(["fix", "--no-cache", "--select", "LL203", "m.py"], root)
    assert result.exit_code == 1
    assert (
        "  = help: no fix: whether this count is too high depends on the machine that trains; "
        "declare the training machine: `[tool.loadlint.target]`\n"
    ) in result.stdout
    assert "num_workers=512" in (root / "m.py").read_text()


def test_hardware_target_shows_the_target_only(tmp_path):
    result = invoke(["hardware", "--target", "cpus=64,gpus=8"], tmp_path)
    assert result.exit_code == 0
    assert result.stdout == (
        "target (nothing of this machine is shown)\n"
        "usable CPUs:      64\n"
        "memory total:     not declared\n"
        "/dev/shm:         not declared\n"
        "GPUs:             8\n"
        "platform:         not declared\n"
        "Python:           not declared\n"
        "torch:            not declared\n"
        "num_workers:      63 (one process)\n"
        "num_workers/rank: 7 (DDP, 8 ranks)\n"
    )
    as_json = invoke(["hardware", "--json", "--target", "gpus=8,memory=512"], tmp_path)
    assert as_json.stdout == '{\n  "declared": [\n    "gpus",\n    "memory"\n  ],\n  "gpus": 8,\n  "memory": 549755813888\n}\n'


def test_init_writes_the_target_once(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    result = invoke(["init", "--target", "cpus=64,gpus=8,memory=512"], tmp_path)
    assert result.exit_code == 0
    assert result.stdout == (
        "Wrote the training machine (--target) to pyproject.toml:\n"
        "[tool.loadlint.target]\ncpus = 64\ngpus = 8\nmemory = 512\n"
    )
    assert (tmp_path / "pyproject.toml").read_text() == (
        '[project]\nname = "x"\n\n[tool.loadlint.target]\ncpus = 64\ngpus = 8\nmemory = 512\n'
    )
    again = invoke(["init"], tmp_path)
    assert again.exit_code == 2
    assert again.stderr == "loadlint: error: pyproject.toml declares [tool.loadlint.target] already; edit it there\n"
    # The rules read what init wrote.
    (tmp_path / "m.py").write_text("from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=8)\n")
    shown = invoke(["check", "--no-cache", "--select", "LL201", "m.py"], tmp_path)
    assert "use `num_workers=8` (target: 64 CPUs, 8 GPUs)" in shown.stdout


def test_init_from_this_machine(tmp_path):
    result = invoke(["init"], tmp_path)
    assert result.exit_code == 0
    written = (tmp_path / "pyproject.toml").read_text()
    assert written.startswith("[tool.loadlint.target]\ncpus = ")
    assert f'\npython = "{sys.version_info[0]}.{sys.version_info[1]}"\n' in written
    check = invoke(["check", "--no-cache", "--show-settings", "."], tmp_path)
    assert check.exit_code == 0
