"""``loadlint init``: the table it writes, ``--force`` replacing it in place,
and the warning when this machine lacks the GPU the code uses."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

import loadlint.hardware.detect as detect_module
import loadlint.hardware.target as target_module
from loadlint.frontends.cli import cli
from loadlint.types import HardwareProfile

CLEAN_ENV = {"NO_COLOR": None, "FORCE_COLOR": None, "LOADLINT_OUTPUT_FORMAT": None}
WARNING = (
    "loadlint: warning: this machine has no GPU but the code uses CUDA: it is not the training machine; "
    "declare that one with `loadlint init --force --target cpus=N,gpus=N`\n"
)
CUDA_SCRIPT = (
    "import torch\nfrom torch.utils.data import DataLoader\n\n\n"
    "def main(ds, model):\n    model = model.cuda()\n    for x in DataLoader(ds, num_workers=2):\n        model(x.to('cuda'))\n"
)


def invoke(args: list[str], cwd: Path):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, args, env=CLEAN_ENV, catch_exceptions=False)
    finally:
        os.chdir(old)


@pytest.fixture
def machine(monkeypatch):
    """This machine as ``init`` detects it: 2 CPUs, ``gpus`` GPUs (set it)."""
    class Machine:
        gpus = 0

    def detect() -> HardwareProfile:
        return HardwareProfile(usable_cpus=2, gpu_count=Machine.gpus, platform="linux", python="3.11")

    monkeypatch.setattr(detect_module, "detect", detect)
    monkeypatch.setattr(target_module, "detect", detect, raising=False)
    return Machine


PYPROJECT = (
    '[project]\nname = "x"  # the name\n\n'
    "[tool.loadlint.target]  # the cluster\ncpus = 64\n# GPUs per node\ngpus = 8\n\n"
    "# Next, the linter's own table.\n[tool.loadlint]\nselect = [\n  \"LL2\",\n]\n"
)


def test_a_second_init_names_force(tmp_path, machine):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    again = invoke(["init", "--target", "cpus=4"], tmp_path)
    assert again.exit_code == 2
    assert again.stdout == ""
    assert again.stderr == (
        "loadlint: error: pyproject.toml declares [tool.loadlint.target] already; edit it there or pass --force to replace it\n"
    )
    assert (tmp_path / "pyproject.toml").read_text() == PYPROJECT


def test_force_replaces_the_table_and_keeps_every_other_byte(tmp_path, machine):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    result = invoke(["init", "--force", "--target", "cpus=16,gpus=2"], tmp_path)
    assert result.exit_code == 0, result.output
    assert result.stdout == "Wrote the training machine (--target) to pyproject.toml:\n[tool.loadlint.target]\ncpus = 16\ngpus = 2\n"
    assert (tmp_path / "pyproject.toml").read_text() == PYPROJECT.replace(
        "[tool.loadlint.target]  # the cluster\ncpus = 64\n# GPUs per node\ngpus = 8\n",
        "[tool.loadlint.target]\ncpus = 16\ngpus = 2\n",
    )


def test_force_on_the_last_table_and_crlf_lines(tmp_path, machine):
    text = '[project]\r\nname = "x"\r\n\r\n[tool.loadlint.target]\r\ncpus = 64'
    (tmp_path / "pyproject.toml").write_bytes(text.encode())
    assert invoke(["init", "--force", "--target", "cpus=8"], tmp_path).exit_code == 0
    assert (tmp_path / "pyproject.toml").read_bytes() == b'[project]\r\nname = "x"\r\n\r\n[tool.loadlint.target]\r\ncpus = 8\r\n'


def test_force_without_a_table_appends(tmp_path, machine):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"')
    assert invoke(["init", "--force", "--target", "cpus=8"], tmp_path).exit_code == 0
    assert (tmp_path / "pyproject.toml").read_text() == '[project]\nname = "x"\n\n[tool.loadlint.target]\ncpus = 8\n'


@pytest.mark.parametrize(
    "text",
    [
        # An inline table: no header to replace.
        "[tool.loadlint]\ntarget = { cpus = 64 }\n",
        # A string spanning lines, one of them looking like a header: the table's end is unclear.
        '[tool.loadlint.target]\ncpus = 64\ntorch = """\n[x]\n"""\n[tool.other]\na = 1\n',
        # `tool` is not a table: a table under it would make the file invalid.
        'tool = "target"\n',
    ],
    ids=["inline", "header-in-a-string", "tool-not-a-table"],
)
def test_force_refuses_what_it_cannot_replace_exactly(tmp_path, machine, text):
    (tmp_path / "pyproject.toml").write_text(text)
    result = invoke(["init", "--force", "--target", "cpus=8"], tmp_path)
    assert result.exit_code == 2
    assert result.stderr.startswith("loadlint: error: pyproject.toml") and result.stderr.endswith("edit it there\n")
    assert result.stderr.count("\n") == 1
    assert (tmp_path / "pyproject.toml").read_text() == text


def test_no_gpu_here_but_the_code_uses_cuda_warns(tmp_path, machine):
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(CUDA_SCRIPT)
    result = invoke(["init"], tmp_path)
    assert result.exit_code == 0
    assert result.stdout.startswith("Wrote the training machine (this machine) to pyproject.toml:\n[tool.loadlint.target]\ncpus = 2\ngpus = 0\n")
    assert result.stderr == WARNING


def test_no_warning_with_a_gpu_a_declared_target_or_cpu_code(tmp_path, machine):
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(CUDA_SCRIPT)
    machine.gpus = 1
    assert invoke(["init"], tmp_path).stderr == ""
    machine.gpus = 0
    # A declared machine is the user's word.
    assert invoke(["init", "--force", "--target", "cpus=8"], tmp_path).stderr == ""
    # Asking about CUDA, or a comment naming it, is not using it.
    (tmp_path / "train.py").write_text(
        "import torch\n# runs on cuda elsewhere\nprint(torch.cuda.is_available())\n"
    )
    result = invoke(["init", "--force"], tmp_path)
    assert result.exit_code == 0 and result.stderr == ""
