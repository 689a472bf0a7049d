"""The flake8 plugin, run through the real flake8: exact output, columns
that match ``loadlint check`` (flake8 adds one to the plugin's column), and
flake8's own selection and ``# noqa`` handling."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("flake8", reason="flake8 is not installed")

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "integrations"
EXPECTED = FIXTURES / "expected"


def flake8(*args: str, cwd: Path = FIXTURES) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_plugin_is_registered():
    proc = subprocess.run([sys.executable, "-m", "flake8", "--version"], capture_output=True, text=True)
    assert "loadlint: " in proc.stdout


def test_exact_output():
    # The fixture folder's loadlint.toml declares the target hardware; the
    # plugin reads the file's project configuration like the command line.
    proc = flake8("--select", "LL101,LL201,LL202", "train_bad.py")
    golden = EXPECTED / "train_bad.flake8.txt"
    if os.environ.get("LOADLINT_REGEN"):
        golden.write_text(proc.stdout, encoding="utf-8")
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == golden.read_text(encoding="utf-8")


def test_columns_match_the_command_line():
    proc = flake8("--select", "LL101,LL201,LL202", "--format", "%(row)d:%(col)d:%(code)s", "train_bad.py")
    flake8_positions = proc.stdout.splitlines()
    from click.testing import CliRunner

    from loadlint.frontends.cli import cli

    old = os.getcwd()
    os.chdir(FIXTURES)
    try:
        result = CliRunner().invoke(
            cli, ["check", "--no-cache", "--select", "LL101,LL201,LL202", "--output-format", "json-lines", "train_bad.py"]
        )
    finally:
        os.chdir(old)
    import json

    cli_positions = [
        f"{d['location']['row']}:{d['location']['column']}:{d['code']}"
        for d in map(json.loads, result.stdout.splitlines())
    ]
    assert flake8_positions == cli_positions
    # The non-ASCII key before the call on line 11 counts as one column.
    assert "11:26:LL101" in flake8_positions


def test_flake8_selection_and_noqa(tmp_path):
    shutil.copy(FIXTURES / "loadlint.toml", tmp_path / "loadlint.toml")
    source = (FIXTURES / "train_bad.py").read_text(encoding="utf-8")
    source = source.replace("shuffle=True)\n", "shuffle=True)  # noqa: LL101\n")
    (tmp_path / "train.py").write_text(source, encoding="utf-8")
    proc = flake8("--select", "LL", "--extend-ignore", "LL202", "train.py", cwd=tmp_path)
    codes = [line.split()[1] for line in proc.stdout.splitlines()]
    assert "LL202" not in codes
    lines_with_ll101 = [line.split(":")[1] for line in proc.stdout.splitlines() if " LL101 " in line]
    assert lines_with_ll101 == ["10", "11"]
    # flake8, not the engine, applies noqa: --disable-noqa brings it back.
    unfiltered = flake8("--select", "LL101", "--disable-noqa", "train.py", cwd=tmp_path)
    assert [line.split(":")[1] for line in unfiltered.stdout.splitlines()] == ["9", "10", "11"]
    # Selected by default, as flake8 does for plugins.
    default = flake8("train.py", cwd=tmp_path)
    assert " LL201 " in default.stdout


def test_broken_configuration_is_reported_not_raised(tmp_path):
    (tmp_path / "loadlint.toml").write_text('selcet = ["LL2"]\n')
    (tmp_path / "train.py").write_text((FIXTURES / "train_bad.py").read_text(encoding="utf-8"), encoding="utf-8")
    proc = flake8("--select", "LL", "train.py", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout.startswith("train.py:1:1: LL000 loadlint configuration error: ")
    assert "'selcet'" in proc.stdout
