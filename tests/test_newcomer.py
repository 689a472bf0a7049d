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

from loadlint.frontends.cli import cli
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
    assert "\n".join(WORKERS_CONSTANT) in single
    assert "DataLoader(ds, batch_size=32, num_workers=LOADER_WORKERS" in single
    # The literal another machine would keep is left alone.
    assert "DataLoader(ds, batch_size=32, num_workers=2" in single
    assert "\n".join(RANK_WORKERS_CONSTANT) in outputs[0]["ddp.py"].decode()


def test_fix_without_target_writes_the_run_time_constant_and_shows_it_first(tmp_path):
    root = _project(tmp_path / "p")
    shown = invoke(["check", "--no-cache", "--select", "LL201", "single.py"], root)
    assert shown.exit_code == 1
    assert (
        "  = help: Set `num_workers=LOADER_WORKERS`, defined after the imports as "
        '`LOADER_CPUS = getattr(os, "process_cpu_count", os.cpu_count)() or 1` and '
        "`LOADER_WORKERS = max(1, LOADER_CPUS - (1 if LOADER_CPUS > 2 else 0))`\n"
    ) in shown.stdout
    fixed = invoke(["fix", "--no-cache", "--select", "LL201", "single.py"], root)
    assert fixed.exit_code == 0, fixed.output
    assert (root / "single.py").read_text() == SINGLE.replace(
        "from torch.utils.data import DataLoader\n",
        "from torch.utils.data import DataLoader\nimport os\n" + "".join(f"{line}\n" for line in WORKERS_CONSTANT),
    ).replace("DataLoader(ds, batch_size=32)", "DataLoader(ds, batch_size=32, num_workers=LOADER_WORKERS)")


def test_fix_with_a_declared_target_writes_its_numbers(tmp_path):
    root = _project(tmp_path / "p")
    fixed = invoke(["fix", "--no-cache", "--select", "LL201,LL203", "--target", "cpus=1,gpus=0", "single.py"], root)
    assert fixed.exit_code == 0, fixed.output
    text = (root / "single.py").read_text()
    assert "DataLoader(ds, batch_size=32, num_workers=1)" in text
    assert "DataLoader(ds, batch_size=32, num_workers=1)\n    for" in text
    assert "LOADER_WORKERS" not in text


def test_oversubscription_without_target_is_not_judged(tmp_path):
    # 512 workers are too many on this machine and fine on a larger one:
    # without a target no machine judges them.
    root = tmp_path
    source = "from torch.utils.data import DataLoader\nloader = DataLoader(ds, num_workers=512)\n"
    (root / "m.py").write_text(source)
    result = invoke(["fix", "--no-cache", "--select", "LL203", "m.py"], root)
    assert (result.exit_code, result.stdout) == (0, "All checks passed!\n")
    assert (root / "m.py").read_text() == source


def test_target_detect_judges_against_this_machine(tmp_path, monkeypatch):
    from loadlint.hardware import detect as detect_module
    from loadlint.types import HardwareProfile

    monkeypatch.setattr(detect_module, "detect", lambda **_: HardwareProfile(usable_cpus=4, gpu_count=0))
    (tmp_path / "m.py").write_text("from torch.utils.data import DataLoader\nloader = DataLoader(ds, num_workers=512)\n")
    result = invoke(["check", "--no-cache", "--output-format", "concise", "--target", "detect", "m.py"], tmp_path)
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == (
        "m.py:2:10: LL203 [*] `num_workers=512` on 4 usable CPUs: workers compete for cores and memory; "
        "use `num_workers=3` (target: 4 CPUs, 0 GPUs)"
    )
    (tmp_path / "pyproject.toml").write_text('[tool.loadlint]\ntarget = "detect"\n')
    result = invoke(["check", "--no-cache", "--output-format", "concise", "m.py"], tmp_path)
    assert result.stdout.splitlines()[0].endswith("use `num_workers=3` (target: 4 CPUs, 0 GPUs)")


def test_hardware_target_shows_the_target_only(tmp_path):
    result = invoke(["hardware", "--target", "cpus=64,gpus=8"], tmp_path)
    assert result.exit_code == 0
    assert result.stdout == (
        "target (the declared keys only)\n"
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
    assert again.stderr == "loadlint: error: pyproject.toml declares [tool.loadlint.target] already; edit it there or pass --force to replace it\n"
    # hardware shows what init wrote, and so do the rules.
    shown = invoke(["hardware"], tmp_path)
    assert shown.stdout.startswith("target (the declared keys only)\nusable CPUs:      64\nmemory total:     512.0 GiB\n")
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


# --- One voice -------------------------------------------------------------


def _main(args, cwd: Path, capsys):
    from loadlint.frontends.cli import main

    old = os.getcwd()
    os.chdir(cwd)
    try:
        code = main(args)
    finally:
        os.chdir(old)
    out = capsys.readouterr()
    return code, out.out, out.err


SEE_CHECK = " (see 'loadlint check --help')\n"


@pytest.mark.parametrize(
    "args, message",
    [
        (["check", "--ignore", "LL999", "."],
         "--ignore: unknown rule selector 'LL999' (codes look like LL201, prefixes like LL2, or ALL)\n"),
        (["check", "--extend-select", "LL999", "."],
         "--extend-select: unknown rule selector 'LL999' (codes look like LL201, prefixes like LL2, or ALL)\n"),
        (["check", "--select", "LL2O1", "."],
         "--select: unknown rule selector 'LL2O1' (codes look like LL201, prefixes like LL2, or ALL)\n"),
        (["check", "--per-file-ignores", "x.py:LL99", "."],
         "--per-file-ignores x.py: unknown rule selector 'LL99' (codes look like LL201, prefixes like LL2, or ALL)\n"),
        (["check", "-j", "0", "."], "invalid value for '-j' / '--jobs': 0 is not in the range x>=1" + SEE_CHECK),
        (["check", "--bogus"], "no such option '--bogus'. Did you mean '--jobs'?" + SEE_CHECK),
        (["fix", "--output-format", "xml"],
         "invalid value for '--output-format': 'xml' is not one of 'full', 'concise', 'json', 'json-lines', "
         "'sarif', 'github', 'gitlab', 'junit', 'pylint'" + " (see 'loadlint fix --help')\n"),
        (["hardware", "--bogus"], "no such option '--bogus'" + " (see 'loadlint hardware --help')\n"),
        (["clean", "--what"], "no such option '--what'" + " (see 'loadlint clean --help')\n"),
        (["bogus"], "no such command 'bogus'" + " (see 'loadlint --help')\n"),
    ],
)
def test_every_usage_error_is_one_line_naming_the_flag_as_typed(args, message, tmp_path, capsys):
    code, out, err = _main(args, tmp_path, capsys)
    assert (code, out, err) == (2, "", "loadlint: error: " + message)


def test_verify_try_says_not_an_int(tmp_path, capsys):
    pytest.importorskip("torch")
    (tmp_path / "s.py").write_text("print(1)\n")
    code, _, err = _main(["verify", "--try", "num_workers=abc", "s.py"], tmp_path, capsys)
    assert code == 2
    assert err == "loadlint: error: invalid value for --try: num_workers=abc: not an int (see 'loadlint verify --help')\n"


def test_summary_splits_problems_by_severity_and_names_the_fixes_fixes_made_possible(tmp_path, capsys):
    # LL201's fix adds workers; LL204 (persistent workers) then applies in a second round.
    (tmp_path / "m.py").write_text(
        "from torch.utils.data import DataLoader\n"
        "def main():\n"
        "    loader = DataLoader(ds, batch_size=4, shuffle=True)\n"
        "    for epoch in range(3):\n"
        "        for batch in loader:\n"
        "            step(batch)\n"
        "if __name__ == '__main__':\n"
        "    main()\n"
    )
    args = ["--no-cache", "--target", "cpus=8,gpus=0", "--select", "LL201,LL204", "m.py"]
    code, out, _ = _main(["check", *args], tmp_path, capsys)
    assert code == 1
    assert out.endswith("Found 1 problem (0 errors, 1 warning).\n[*] 1 fixable with --fix.\n")
    code, _, err = _main(["fix", "--diff", *args], tmp_path, capsys)
    assert code == 1
    assert err == (
        "Would fix 2 problems; 1 of the 2 fixes became possible only once the others were applied "
        "(`check` counts 1 as fixable).\n"
    )
    code, out, _ = _main(["fix", *args], tmp_path, capsys)
    assert code == 0
    assert out == (
        "Found 2 problems (2 fixed, 0 remaining).\n"
        "1 of the 2 fixes became possible only once the others were applied (`check` counts 1 as fixable).\n"
    )


def test_waiting_is_worded_by_the_target(tmp_path, capsys):
    (tmp_path / "m.py").write_text("from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=4)\n")
    for target, who in (("cpus=8,gpus=0", "the training step waits"), ("cpus=8,gpus=1", "the accelerator waits")):
        _, out, _ = _main(["check", "--no-cache", "--target", target, "--select", "LL201", "m.py"], tmp_path, capsys)
        assert f"batches are loaded in the training process, {who}; use `num_workers=4`" in out


def test_paths_in_messages_are_relative_to_the_current_folder(tmp_path, capsys):
    root = tmp_path / "proj"
    shutil.copytree(REPO / "examples" / "modular", root / "ex" / "modular")
    (root / "pyproject.toml").write_text("[tool.loadlint]\n")
    args = ["check", "--no-cache", "--select", "LL204", "--target", "cpus=8,gpus=1"]
    _, out, _ = _main([*args, "ex/modular/data_setup.py"], root, capsys)
    assert (
        "ex/modular/data_setup.py:39:20: LL204 [*] `persistent_workers` is not set: `os.cpu_count()` workers of this "
        "loader are started again at every epoch; set `persistent_workers=True` (iterated every epoch by "
        "`train_step` (ex/modular/engine.py:9) called from ex/modular/engine.py:32, from ex/modular/train.py:16)\n"
    ) in out
    _, out, _ = _main([*args, "data_setup.py"], root / "ex" / "modular", capsys)
    assert "(iterated every epoch by `train_step` (engine.py:9) called from engine.py:32, from train.py:16)\n" in out


# --- The ruff user's habits --------------------------------------------------

NOQA = """\
from torch.utils.data import DataLoader

a = DataLoader(ds, batch_size=4)  # noqa: LL201
b = DataLoader(ds, batch_size=4, num_workers=2)  # noqa: LL201
c = DataLoader(ds, batch_size=4, num_workers=2)  # noqa: LL2O1, E501
"""
TARGET = ["--no-cache", "--target", "cpus=8,gpus=0"]


def test_unused_and_invalid_noqa_codes_are_reported_and_removed(tmp_path, capsys):
    (tmp_path / "m.py").write_text(NOQA)
    code, out, _ = _main(["check", *TARGET, "--output-format", "concise", "m.py"], tmp_path, capsys)
    assert code == 1
    assert out == (
        "m.py:4:50: LL902 [*] `# noqa` suppresses nothing with `LL201`: no LL201 finding starts on this line; "
        "remove it\n"
        "m.py:5:50: LL902 [*] `# noqa` suppresses nothing with `LL2O1`: `LL2O1` is no loadlint rule code "
        "(did you mean `LL201`?); remove it\n"
        "Found 2 problems (0 errors, 2 warnings).\n"
        "[*] 2 fixable with --fix.\n"
    )
    code, out, _ = _main(["fix", *TARGET, "m.py"], tmp_path, capsys)
    assert (code, out) == (0, "Found 2 problems (2 fixed, 0 remaining).\n")
    assert (tmp_path / "m.py").read_text() == NOQA.replace(
        "num_workers=2)  # noqa: LL201\n", "num_workers=2)\n"
    ).replace("# noqa: LL2O1, E501", "# noqa: E501")


def test_add_noqa_suppresses_every_finding_where_it_is_reported(tmp_path, capsys):
    source = (
        "from torch.utils.data import DataLoader\n"
        "a = DataLoader(ds, batch_size=4)\n"
        "b = DataLoader(ds,\n"
        "    batch_size=4)  # keep\n"
        "c = DataLoader(ds, batch_size=4)  # noqa: E501\n"
    )
    (tmp_path / "m.py").write_text(source)
    code, out, _ = _main(["check", *TARGET, "--add-noqa", "m.py"], tmp_path, capsys)
    assert (code, out) == (0, "Added 3 noqa directives.\n")
    assert (tmp_path / "m.py").read_text() == (
        "from torch.utils.data import DataLoader\n"
        "a = DataLoader(ds, batch_size=4)  # noqa: LL201\n"
        "b = DataLoader(ds,  # noqa: LL201\n"
        "    batch_size=4)  # keep\n"
        "c = DataLoader(ds, batch_size=4)  # noqa: E501, LL201\n"
    )
    code, out, _ = _main(["check", *TARGET, "m.py"], tmp_path, capsys)
    assert (code, out) == (0, "All checks passed!\n")
    code, _, err = _main(["fix", *TARGET, "--add-noqa", "m.py"], tmp_path, capsys)
    assert (code, err) == (2, "loadlint: error: --add-noqa cannot be combined with --fix or --diff\n")


@pytest.mark.parametrize("fmt, expected", [
    ("json", '[\n  {\n    "code": "LL201",\n    "name": "synchronous-loading",\n    "count": 2,\n'
             '    "fixable": true,\n    "severity": "warning"\n  }\n]\n'),
    ("json-lines", '{"code": "LL201", "name": "synchronous-loading", "count": 2, "fixable": true, "severity": "warning"}\n'),
    ("full", "2  LL201  [*] synchronous-loading\n"),
])
def test_statistics_in_every_format(fmt, expected, tmp_path, capsys):
    (tmp_path / "m.py").write_text("from torch.utils.data import DataLoader\na = DataLoader(ds)\nb = DataLoader(ds)\n")
    code, out, _ = _main(["check", *TARGET, "--statistics", "--output-format", fmt, "m.py"], tmp_path, capsys)
    assert (code, out) == (1, expected)


def test_no_python_files_is_a_warning_not_a_pass(tmp_path, capsys):
    code, out, err = _main(["check", "--no-cache", "."], tmp_path, capsys)
    assert (code, out, err) == (0, "", "loadlint: warning: No Python files found under the given path(s)\n")
    (tmp_path / "m.py").write_text("x = 1\n")
    code, out, err = _main(["check", "--no-cache", "--extend-exclude", "m.py", "--output-format", "json", "."], tmp_path, capsys)
    assert (code, out, err) == (0, "[]\n", "loadlint: warning: No Python files found under the given path(s)\n")
    code, out, err = _main(["check", "--no-cache", "."], tmp_path, capsys)
    assert (code, out, err) == (0, "All checks passed!\n", "")


def test_rule_lookup_by_name(tmp_path, capsys):
    code, out, _ = _main(["rule", "synchronous-loading"], tmp_path, capsys)
    assert code == 0 and out.startswith("# synchronous-loading (LL201)\n")
    code, out, _ = _main(["rule", "unused-noqa"], tmp_path, capsys)
    assert code == 0 and out.startswith("# unused-noqa (LL902)\n")
    code, _, err = _main(["rule", "no-such-rule"], tmp_path, capsys)
    assert (code, err) == (
        2, "loadlint: error: unknown rule 'no-such-rule' (give a code like LL201 or a name like synchronous-loading)\n"
    )


# --- Examples that run anywhere ---------------------------------------------


def test_examples_import_nothing_beyond_the_verify_extra():
    import ast

    local = {p.stem for p in (REPO / "examples").rglob("*.py")}
    allowed = set(sys.stdlib_module_names) | {"torch", "numpy"} | local
    for path in sorted((REPO / "examples").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name} imports {name}"


def test_findings_left_after_a_fix_quote_the_fixed_lines(tmp_path, capsys):
    # The fix adds three lines after the imports; the LL101 left is quoted from the fixed text.
    (tmp_path / "m.py").write_text(
        "import torch.distributed as dist\n"
        "from torch.utils.data import DataLoader\n"
        "dist.init_process_group('gloo')\n"
        "loader = DataLoader(ds, batch_size=4)\n"
    )
    code, out, _ = _main(["fix", "--no-cache", "--select", "LL101,LL201", "m.py"], tmp_path, capsys)
    assert code == 1
    assert "7 | loader = DataLoader(ds, batch_size=4, num_workers=LOADER_WORKERS)\n" in out


def test_code_that_moves_batches_to_cuda_has_an_accelerator_waiting(tmp_path, capsys):
    (tmp_path / "m.py").write_text(
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=4)\n"
        "for x in loader:\n    x.to('cuda')\n"
    )
    # GPUs not declared: whatever this machine has, the code says an accelerator waits.
    _, out, _ = _main(["check", "--no-cache", "--target", "cpus=8", "--select", "LL201", "m.py"], tmp_path, capsys)
    assert "batches are loaded in the training process, the accelerator waits; use `num_workers=4`" in out
    _, out, _ = _main(["check", "--no-cache", "--target", "cpus=8,gpus=0", "--select", "LL201", "m.py"], tmp_path, capsys)
    assert "batches are loaded in the training process, the training step waits; use `num_workers=4`" in out


def test_verify_suggests_this_machines_numbers_where_fix_writes_the_constant(tmp_path):
    from loadlint.api import suggest_for_call
    from loadlint.types import HardwareProfile

    path = tmp_path / "m.py"
    path.write_text("from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=32)\n")
    here = HardwareProfile(usable_cpus=8, gpu_count=0)  # detected, nothing declared
    suggestion = suggest_for_call(str(path), 2, here)
    assert suggestion is not None
    assert (suggestion["batch_size"], suggestion["num_workers"]) == (32, 7)


def test_the_ddp_example_after_fix_still_names_the_process_group(tmp_path, capsys):
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    code, out, _ = _main(["fix", "--no-cache", "--select", "LL101,LL201,LL203", "examples/train_ddp.py"], tmp_path, capsys)
    assert code == 1
    assert "the module trains distributed (`torch.distributed.init_process_group`) but this DataLoader" in out
    assert "os.environ.get" not in out


def test_fix_names_the_fixes_made_possible_across_the_project(tmp_path, capsys):
    # check offers 11 fixes on the examples; fixing them makes 6 more possible
    # (a project fix's cascade, a file's own, and LL204 on the workers LL201
    # and LL203 wrote: train_cpu.py's loader, train_ddp.py's two), and the summary says both.
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    code, out, _ = _main(["check", "--no-cache", "examples"], tmp_path, capsys)
    # Unsafe: train_ddp.py's two LL101 fixes and the guard of modular/train.py (a project LL013).
    assert (code, out.splitlines()[-1]) == (1, "[*] 11 fixable with --fix (3 unsafe fixes available with --unsafe-fixes).")
    code, out, _ = _main(["fix", "--no-cache", "examples"], tmp_path, capsys)
    assert (code, out.splitlines()[-3:]) == (1, [
        "Found 20 problems (17 fixed, 3 remaining: 3 errors, 0 warnings).",
        "6 of the 17 fixes became possible only once the others were applied (`check` counts 11 as fixable).",
        "No safe fixes available (3 unsafe fixes available with --unsafe-fixes).",
    ])
