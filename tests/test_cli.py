"""The command line end to end: exit codes, every output format (exact
output for one fixture), colour, ``-o``, the output-format environment
variable, stdin, ``--force-exclude`` and ``--show-settings``.

Golden files live in ``tests/fixtures/integrations/expected``; regenerate
them with ``LOADLINT_REGEN=1 python -m pytest tests/test_cli.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadlint.frontends.cli import cli

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "integrations"
EXPECTED = FIXTURES / "expected"
FIXTURE = "tests/fixtures/integrations/train_bad.py"
#: A declared target and a fixed selection: the output depends on neither the
#: host nor on rules added later.
BASE = ["check", "--no-cache", "--target", "cpus=4,gpus=1", "--select", "LL101,LL201,LL202"]
FORMATS = ["full", "concise", "json", "json-lines", "sarif", "github", "gitlab", "junit", "pylint"]
CLEAN_ENV = {"NO_COLOR": None, "FORCE_COLOR": None, "LOADLINT_OUTPUT_FORMAT": None}


def invoke(args, *, cwd: Path = REPO, env=None, input=None):
    runner = CliRunner()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return runner.invoke(cli, args, env={**CLEAN_ENV, **(env or {})}, input=input, catch_exceptions=False)
    finally:
        os.chdir(old)


def _normalise(fmt: str, text: str) -> str:
    if fmt != "sarif":
        return text
    # The rule documentation is covered by test_sarif; the root URI is the
    # checkout's absolute location.
    log = json.loads(text)
    run = log["runs"][0]
    run["originalUriBaseIds"]["%SRCROOT%"]["uri"] = "file:///<root>/"
    run["tool"]["driver"]["version"] = run["tool"]["driver"]["semanticVersion"] = "<version>"
    for rule in run["tool"]["driver"]["rules"]:
        for key in ("fullDescription", "help"):
            rule[key] = "<documentation>"
    return json.dumps(log, indent=2) + "\n"


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_exact_output(fmt):
    result = invoke([*BASE, "--output-format", fmt, FIXTURE])
    assert result.exit_code == 1, result.output
    text = _normalise(fmt, result.stdout)
    golden = EXPECTED / f"train_bad.{fmt}.txt"
    if os.environ.get("LOADLINT_REGEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")


def test_exit_codes(tmp_path):
    clean = tmp_path / "clean.py"
    clean.write_text("from torch.utils.data import DataLoader\n\nloader = DataLoader([1, 2], num_workers=2)\n")
    assert invoke([*BASE, str(clean)]).exit_code == 0
    assert invoke([*BASE, FIXTURE]).exit_code == 1
    assert invoke([*BASE, "--exit-zero", FIXTURE]).exit_code == 0
    missing = invoke([*BASE, str(tmp_path / "nope.py")])
    assert missing.exit_code == 2
    assert invoke([*BASE, "--output-format", "xml", FIXTURE]).exit_code == 2
    assert invoke([*BASE, "--select", "XX1", FIXTURE]).exit_code == 2


def test_syntax_error_is_a_finding_not_a_crash(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("from torch.utils.data import DataLoader\nDataLoader(\n")
    result = invoke(["check", "--no-cache", "--target", "cpus=4,gpus=1", "--output-format", "concise", str(broken)])
    assert result.exit_code == 1
    assert "LL900" in result.stdout


def test_config_error_is_exit_2_and_one_line(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.loadlint]\nselcet = ["LL2"]\n')
    (tmp_path / "train.py").write_text("from torch.utils.data import DataLoader\n")
    proc = subprocess.run(
        [sys.executable, "-m", "loadlint", "check", "--no-cache", "."], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1
    assert "pyproject.toml" in lines[0] and "'selcet'" in lines[0] and "allowed:" in lines[0] and "select" in lines[0]


def test_output_format_from_environment_and_flag_wins():
    result = invoke([*BASE, FIXTURE], env={"LOADLINT_OUTPUT_FORMAT": "pylint"})
    assert result.stdout == (EXPECTED / "train_bad.pylint.txt").read_text(encoding="utf-8")
    result = invoke([*BASE, "--output-format", "concise", FIXTURE], env={"LOADLINT_OUTPUT_FORMAT": "pylint"})
    assert result.stdout == (EXPECTED / "train_bad.concise.txt").read_text(encoding="utf-8")


def test_output_format_from_config(tmp_path):
    (tmp_path / "loadlint.toml").write_text('output-format = "pylint"\n[target]\ncpus = 4\ngpus = 1\n')
    (tmp_path / "train.py").write_text((FIXTURES / "train_bad.py").read_text(encoding="utf-8"))
    result = invoke(["check", "--no-cache", "--select", "LL201", "train.py"], cwd=tmp_path)
    assert result.stdout.startswith("train.py:9: [LL201] ")


def test_output_file(tmp_path):
    target = tmp_path / "reports" / "loadlint.json"
    result = invoke([*BASE, "--output-format", "json", "-o", str(target), FIXTURE])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert target.read_text(encoding="utf-8") == (EXPECTED / "train_bad.json.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("choice", "env", "coloured"),
    [
        ("always", {}, True),
        ("never", {"FORCE_COLOR": "1"}, False),
        ("auto", {}, False),  # not a TTY
        ("auto", {"FORCE_COLOR": "1"}, True),
        ("auto", {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
    ],
)
def test_colour(choice, env, coloured):
    result = invoke([*BASE, "--color", choice, FIXTURE], env=env)
    assert ("\x1b[" in result.stdout) is coloured
    if coloured:
        plain = result.stdout
        import re

        assert re.sub(r"\x1b\[[0-9;]*m", "", plain) == (EXPECTED / "train_bad.full.txt").read_text(encoding="utf-8")


def test_colour_never_in_machine_formats():
    result = invoke([*BASE, "--color", "always", "--output-format", "json", FIXTURE])
    assert "\x1b[" not in result.stdout


def test_colour_survives_a_pipe():
    # click strips escape codes on a non-TTY unless told otherwise.
    proc = subprocess.run(
        [sys.executable, "-m", "loadlint", *BASE, "--color", "always", FIXTURE],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")},
    )
    assert proc.returncode == 1
    assert "\x1b[" in proc.stdout


def test_statistics():
    result = invoke([*BASE, "--statistics", FIXTURE])
    assert result.exit_code == 1
    assert result.stdout == (
        "3  LL101  [ ] missing-distributed-sampler\n"
        "1  LL201  [*] synchronous-loading\n"
        "1  LL202  [*] missing-pin-memory\n"
    )


def test_stdin_uses_the_config_of_the_stdin_filename(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.loadlint]\nper-file-ignores = { "scripts/*" = ["LL201"] }\n[tool.loadlint.target]\ncpus = 4\ngpus = 1\n'
    )
    source = (FIXTURES / "train_bad.py").read_text(encoding="utf-8")
    base = ["check", "--no-cache", "--select", "LL201,LL202", "--output-format", "concise"]
    plain = invoke([*base, "-", "--stdin-filename", "train.py"], cwd=tmp_path, input=source)
    assert plain.exit_code == 1
    assert "train.py:9:20: LL201" in plain.stdout
    ignored = invoke([*base, "-", "--stdin-filename", "scripts/train.py"], cwd=tmp_path, input=source)
    assert "LL201" not in ignored.stdout and "scripts/train.py:9:20: LL202" in ignored.stdout
    # --stdin-filename alone reads stdin, as in ruff.
    alone = invoke([*base, "--stdin-filename", "train.py"], cwd=tmp_path, input=source)
    assert alone.stdout == plain.stdout


def test_force_exclude(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.loadlint]\nextend-exclude = ["generated"]\n')
    generated = tmp_path / "generated"
    generated.mkdir()
    (generated / "train.py").write_text((FIXTURES / "train_bad.py").read_text(encoding="utf-8"))
    args = ["check", "--no-cache", "--target", "cpus=4,gpus=1", "--output-format", "concise"]
    # Named explicitly: checked, unless --force-exclude (what pre-commit passes).
    assert invoke([*args, "generated/train.py"], cwd=tmp_path).exit_code == 1
    forced = invoke([*args, "--force-exclude", "generated/train.py"], cwd=tmp_path)
    assert forced.exit_code == 0 and forced.stdout == ""
    assert forced.stderr == "loadlint: warning: No Python files found under the given path(s)\n"
    # Walking the folder skips it either way.
    assert invoke([*args, "."], cwd=tmp_path).exit_code == 0
    source = (FIXTURES / "train_bad.py").read_text(encoding="utf-8")
    stdin = invoke([*args, "--force-exclude", "-", "--stdin-filename", "generated/train.py"], cwd=tmp_path, input=source)
    assert stdin.exit_code == 0 and stdin.stdout == ""


def test_show_settings(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.loadlint]\nignore = ["LL202"]\n[tool.loadlint.target]\ncpus = 8\ngpus = 2\n'
    )
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "loadlint.toml").write_text('select = ["LL2"]\n[target]\ncpus = 16\n')
    top = invoke(["check", "--show-settings", "train.py"], cwd=tmp_path)
    assert top.exit_code == 0
    assert f"# Settings path: {tmp_path.resolve() / 'pyproject.toml'}" in top.stdout
    assert 'ignore = ["LL202"]' in top.stdout and "cpus = 8\ngpus = 2" in top.stdout
    nested = invoke(["check", "--show-settings", "--ignore", "LL203", "sub/train.py"], cwd=tmp_path)
    assert f"# Settings path: {(sub / 'loadlint.toml').resolve()}" in nested.stdout
    assert 'select = ["LL2"]' in nested.stdout and 'ignore = ["LL203"]' in nested.stdout
    assert "cpus = 16" in nested.stdout and "gpus" not in nested.stdout.split("[tool.loadlint.target]")[1]
    enabled = nested.stdout.splitlines()[2]
    assert enabled.startswith("# Enabled rules: ") and "LL201" in enabled and "LL203" not in enabled


CONSOLE = """\
import atexit, sys, threading, time
atexit.register(lambda: print("exit handler ran", flush=True))


class TornDown:
    def __del__(self):
        print("torn down", flush=True)


kept = TornDown()
if sys.argv[1] == "thread":
    threading.Thread(target=lambda: (time.sleep(3), print("thread finished", flush=True))).start()
sys.argv = ["loadlint", "check", "--isolated", "--no-cache", "--output-format", "concise", "train.py"]
from loadlint.frontends.cli import console
console()
"""


@pytest.mark.parametrize("alive", ["none", "thread"])
def test_console_exits_with_the_code_after_the_exit_handlers(tmp_path: Path, alive: str) -> None:
    (tmp_path / "train.py").write_text(
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, num_workers=0, prefetch_factor=2)\n"
    )
    run = subprocess.run([sys.executable, "-c", CONSOLE, alive], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 1, run.stderr
    assert run.stderr == ""
    lines = run.stdout.splitlines()
    assert [line for line in lines if line.startswith("train.py:")][0].startswith("train.py:2:10: LL001 ")
    # Without a thread the interpreter is left once the handlers ran, its
    # objects never torn down; a thread still alive then (it sleeps three
    # seconds, the check takes well under one) is waited for, as a normal exit waits.
    assert "exit handler ran" in lines
    assert ("thread finished" in lines) == (alive == "thread")
    assert ("torn down" in lines) == (alive == "thread")
