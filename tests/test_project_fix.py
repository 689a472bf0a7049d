"""``fix`` runs the project phase ``check`` runs: after a fix, a second
``fix`` and a ``check`` report the same findings and exit code, on the
examples and on every golden project."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadlint.cli import cli

ROOT = Path(__file__).parents[1]
PROJECTS = ROOT / "tests" / "fixtures" / "projects"
TARGET = "cpus=8,gpus=1,memory=64,shm=16,platform=linux,python=3.14"
ENV = {"NO_COLOR": "1", "LOADLINT_CACHE_DIR": None}
CASES = ["examples"] + sorted(p.name for p in PROJECTS.iterdir() if p.is_dir())


def run(folder: Path, command: str, *args: str) -> tuple[str, int]:
    old = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(
            cli,
            [command, "--isolated", "--select", "ALL", "--target", TARGET, "--output-format", "concise", *args, "."],
            env=ENV,
            catch_exceptions=False,
        )
    finally:
        os.chdir(old)
    return result.output, result.exit_code


def copy_of(case: str, tmp_path: Path) -> Path:
    folder = tmp_path / case
    shutil.copytree(ROOT / "examples" if case == "examples" else PROJECTS / case, folder)
    (folder / "pyproject.toml").touch()
    return folder


def findings(output: str) -> list[str]:
    return [line for line in output.splitlines() if ": LL" in line]


@pytest.mark.parametrize("unsafe", [[], ["--unsafe-fixes"]], ids=["safe", "unsafe"])
@pytest.mark.parametrize("case", CASES)
def test_fix_then_fix_and_check_agree(case: str, unsafe: list[str], tmp_path: Path) -> None:
    folder = copy_of(case, tmp_path)
    first, first_code = run(folder, "fix", "--no-cache", *unsafe)
    again, again_code = run(folder, "fix", "--no-cache", *unsafe)
    checked, checked_code = run(folder, "check", "--no-cache", *unsafe)
    assert findings(again) == findings(checked) == findings(first)
    assert again_code == checked_code == first_code
    # Nothing left to do: the second run changed nothing and says so as check does.
    assert again == checked


def test_fix_reports_the_project_findings_check_reports(tmp_path: Path) -> None:
    folder = copy_of("examples", tmp_path) / "modular"
    out, code = run(folder, "fix", "--no-cache")
    assert code == 1
    assert "data_setup.py:15:20: LL204" in out and "train.py:17:1: LL013" in out
    # The cached run agrees with the uncached one.
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert run(folder, "fix", *cache) == (out, code)
    assert run(folder, "check", *cache) == (out, code)
