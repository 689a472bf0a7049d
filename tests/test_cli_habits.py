"""Smaller habits a CI user meets first: sizes shown in the file's unit,
``--statistics`` only where the format can carry it, ``--force-exclude``
and ``.gitignore``, ``--stdin-filename`` beside paths, a trace that is not
JSON, files the pre-filter skips that cannot be read, and a message that
names the variable the call passes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadlint.frontends.cli import cli, main

CLEAN_ENV = {"NO_COLOR": None, "FORCE_COLOR": None, "LOADLINT_OUTPUT_FORMAT": None}
TARGET = ["--no-cache", "--target", "cpus=4,gpus=0"]
LOADER = "from torch.utils.data import DataLoader\nx = DataLoader(ds)\n"


def invoke(args, cwd: Path, input=None, env=None):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, args, env={**CLEAN_ENV, **(env or {})}, input=input, catch_exceptions=False)
    finally:
        os.chdir(old)


def test_show_settings_prints_sizes_in_the_files_unit(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.loadlint.target]\ncpus = 8\nmemory = 23\nshm = "512M"\n')
    (tmp_path / "a.py").write_text("x = 1\n")
    result = invoke(["check", "--show-settings", "a.py"], tmp_path)
    assert result.exit_code == 0
    assert result.stdout.endswith('[tool.loadlint.target]\ncpus = 8\nmemory = 23\nshm = "512MiB"\n')
    (tmp_path / "pyproject.toml").write_text('[tool.loadlint.target]\nmemory = "1000B"\nshm = "1.5G"\n')
    result = invoke(["check", "--show-settings", "a.py"], tmp_path)
    assert result.stdout.endswith('[tool.loadlint.target]\nmemory = "1000B"\nshm = "1536MiB"\n')


@pytest.mark.parametrize("fmt", ["sarif", "github", "gitlab", "junit", "pylint"])
def test_statistics_refuse_a_format_that_cannot_carry_them(tmp_path, fmt):
    (tmp_path / "m.py").write_text(LOADER)
    result = invoke(["check", *TARGET, "--statistics", "--output-format", fmt, "m.py"], tmp_path)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"loadlint: error: --statistics cannot be written as {fmt}: use --output-format full, concise, json or json-lines\n"
    )
    # The format may come from the environment (a CI job's setting) and stdin too.
    result = invoke(["check", *TARGET, "--statistics", "-"], tmp_path, input=LOADER, env={"LOADLINT_OUTPUT_FORMAT": fmt})
    assert result.exit_code == 2 and "--statistics cannot be written as" in result.stderr


def test_statistics_in_concise_is_the_table(tmp_path):
    (tmp_path / "m.py").write_text(LOADER)
    result = invoke(["check", *TARGET, "--statistics", "--output-format", "concise", "m.py"], tmp_path)
    assert (result.exit_code, result.stdout) == (1, "1  LL201  [*] synchronous-loading\n")


@pytest.fixture
def ignored_tree(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("gen/\nsecret.py\n")
    for name in ("gen/a.py", "secret.py", "ok.py", "sub/secret.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(LOADER)
    return tmp_path


def test_force_exclude_skips_gitignored_files_named_explicitly(ignored_tree):
    names = ["gen/a.py", "secret.py", "ok.py", "sub/secret.py", "gen"]
    result = invoke(["check", *TARGET, "--force-exclude", "--output-format", "concise", *names], ignored_tree)
    assert result.exit_code == 1
    assert [line.split(":")[0] for line in result.stdout.splitlines() if ": LL" in line] == ["ok.py"]
    # Without --force-exclude a file named is checked, ignored or not (ruff's rule).
    result = invoke(["check", *TARGET, "--output-format", "concise", "secret.py"], ignored_tree)
    assert result.stdout.startswith("secret.py:2:5: LL201")
    # respect-gitignore = false: .gitignore excludes nothing.
    (ignored_tree / "pyproject.toml").write_text("[tool.loadlint]\nrespect-gitignore = false\n")
    result = invoke(["check", *TARGET, "--force-exclude", "--output-format", "concise", "secret.py"], ignored_tree)
    assert result.stdout.startswith("secret.py:2:5: LL201")


def test_force_exclude_passes_a_gitignored_stdin_filename_through(ignored_tree):
    result = invoke(["fix", *TARGET, "--force-exclude", "--stdin-filename", "gen/b.py", "-"], ignored_tree, input=LOADER)
    assert (result.exit_code, result.stdout, result.stderr) == (0, LOADER, "")


def test_stdin_filename_beside_paths_reads_stdin_and_says_so(tmp_path):
    (tmp_path / "m.py").write_text(LOADER)
    result = invoke(["check", *TARGET, "--output-format", "concise", "--stdin-filename", "s.py", "m.py", "m.py"],
                    tmp_path, input="x = 1\n")
    assert (result.exit_code, result.stdout) == (0, "All checks passed!\n")
    assert result.stderr == "loadlint: warning: ignoring m.py in favour of standard input (--stdin-filename)\n"
    result = invoke(["check", *TARGET, "--output-format", "concise", "--stdin-filename", "s.py", "-"], tmp_path,
                    input=LOADER)
    assert result.exit_code == 1 and result.stdout.startswith("s.py:2:5: LL201") and result.stderr == ""


@pytest.mark.parametrize("content, message", [
    (b"{bad", "malformed JSON at character 1: Expecting value"),
    (b'[{"a": 1}, bad]', "malformed JSON at character 11: Expecting value"),
    (b'{"traceEvents": [{"name": "x", "ts": tr', "truncated JSON (the file ends inside the trace)"),
    (b'{"traceEvents": [{"name": "x", "ts": 12', "truncated JSON (the file ends inside the trace)"),
    (b'{"traceEvents": [{"name": "x", "ts": 12}, {"na', "truncated JSON (the file ends inside the trace)"),
])
def test_trace_tells_invalid_json_from_a_truncated_file(tmp_path, capsys, content, message):
    path = tmp_path / "t.json"
    path.write_bytes(content)
    code = main(["trace", str(path)])
    out, err = capsys.readouterr()
    assert (code, out, err) == (2, "", f"loadlint: error: {path}: {message}\n")


#: Files that never call ``DataLoader(`` but cannot be read: each is reported
#: (decoding is cheap), while a plain syntax error there is not parsed at all.
UNREADABLE = {
    "nul.py": (b"x = 1\x00\n", "nul.py:1:6: LL901 cannot read file: source contains a NUL byte (binary file?)"),
    "random.py": (b"\x89PNG\r\n\x1a\n\xf3\xff", "random.py:1:1: LL901 cannot read file: cannot decode as utf-8: invalid byte 0x89"),
    "cookie.py": (b"# -*- coding: nope -*-\nx = 1\n",
                  "cookie.py:1:1: LL901 cannot read file: invalid encoding declaration: unknown encoding: nope"),
    "empty.ipynb": (b"", "empty.ipynb:1:1: LL901 malformed notebook JSON: Expecting value"),
    "bad.ipynb": (b"{bad", "bad.ipynb:1:2: LL901 malformed notebook JSON: Expecting property name enclosed in double quotes"),
}


@pytest.mark.parametrize("command", ["check", "fix"])
def test_files_the_prefilter_skips_are_still_reported_when_unreadable(tmp_path, command):
    for name, (data, _) in UNREADABLE.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "syntax.py").write_text("x = (\n")  # not parsed: LL900 covers files that may build a loader
    (tmp_path / "fine.ipynb").write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    result = invoke([command, *TARGET, "--output-format", "concise", "."], tmp_path)
    assert result.exit_code == 1
    assert result.stdout.splitlines() == sorted(line for _, line in UNREADABLE.values()) + [
        "Found 5 problems (5 errors, 0 warnings)."
    ]
    assert (tmp_path / "empty.ipynb").read_bytes() == b""


def test_a_clean_skipped_file_costs_no_finding(tmp_path):
    (tmp_path / "plain.py").write_text("# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n", encoding="latin-1")
    result = invoke(["check", *TARGET, "plain.py"], tmp_path)
    assert (result.exit_code, result.stdout) == (0, "All checks passed!\n")


def test_pickle_hazard_names_the_variable_the_call_passes(tmp_path):
    (tmp_path / "m.py").write_text(
        "from torch.utils.data import DataLoader\n"
        "from torchvision import datasets, transforms\n"
        "transform = transforms.Compose([transforms.Lambda(lambda x: x.mul(255))])\n"
        "train_dataset = datasets.ImageFolder('data', transform)\n"
        "train_loader = DataLoader(train_dataset, batch_size=4)\n"
    )
    result = invoke(["check", "--no-cache", "--unsafe-fixes", "--output-format", "json", "m.py"], tmp_path)
    [ll201] = [f for f in json.loads(result.stdout) if f["code"] == "LL201"]
    assert "(unsafe: `train_dataset` is built with `transform`, which holds a lambda" in ll201["fix"]["message"]
