"""``loadlint fix``: the command line (ruff's flags and exit codes), the
safety machinery (re-parse, crash veto, atomic writes) and ``--from-verify``.

Every run declares its target so that the suggested values never depend on
the machine the tests run on.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadlint.engine import decision as engine
from loadlint.sources.files import FileChanged, write_atomic
from loadlint.frontends.cli import cli
from loadlint.engine.decision import FixFailed, fix_text
from loadlint.types import Options
from loadlint.types import Finding, HardwareProfile, Location

TARGET = ["--target", "cpus=4,gpus=1,platform=linux,python=3.11", "--isolated", "--no-cache"]
PROFILE = HardwareProfile(
    usable_cpus=4, gpu_count=1, platform="linux", python="3.11",
    declared=frozenset({"cpus", "gpus", "platform", "python"}),
)
CORE = frozenset({"LL101", "LL201", "LL202", "LL203"})

SIMPLE = """\
from torch.utils.data import DataLoader

loader = DataLoader(dataset, batch_size=64)
for x in loader:
    x = x.cuda()
"""

DISTRIBUTED = """\
import torch.distributed as dist
from torch.utils.data import DataLoader

dist.init_process_group("gloo")
loader = DataLoader(dataset, batch_size=64, shuffle=True, pin_memory=True)
for epoch in range(3):
    for batch in loader:
        step(batch)
"""


def run(args: list[str], stdin: bytes | None = None):
    runner = CliRunner()
    return runner.invoke(cli, [*args, *TARGET, "--select", ",".join(sorted(CORE))], input=stdin, catch_exceptions=False)


def write(tmp_path: Path, text: str, name: str = "train.py") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode())
    return path


def fix(text: str, *, unsafe: bool = True, select=CORE, profile=PROFILE):
    return fix_text(text, "x.py", Options(frozenset(select), lambda: profile), unsafe=unsafe)


# -- the command line -----------------------------------------------------------


def test_fix_is_check_with_fix(tmp_path: Path) -> None:
    a = write(tmp_path, SIMPLE, "a.py")
    b = write(tmp_path, SIMPLE, "b.py")
    r1 = run(["fix", str(a)])
    r2 = run(["check", "--fix", str(b)])
    assert r1.exit_code == r2.exit_code == 0
    assert a.read_text() == b.read_text()
    assert "loader = DataLoader(dataset, batch_size=64, num_workers=3, pin_memory=True)\n" in a.read_text()
    assert r1.output == "Found 2 problems (2 fixed, 0 remaining).\n"


def test_check_marks_fixable_findings_and_counts_unsafe_ones(tmp_path: Path) -> None:
    path = write(tmp_path, DISTRIBUTED)
    result = run(["check", "--output-format", "concise", str(path)])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    # LL101's fix is unsafe: no [*] without --unsafe-fixes.
    assert lines[0].endswith("LL101 every rank iterates the whole dataset: the module trains distributed "
                             "(`torch.distributed.init_process_group`) but this DataLoader has no `sampler`; "
                             "pass `sampler=DistributedSampler(dataset)`")
    assert lines[-1] == "[*] 1 fixable with --fix (1 unsafe fix available with --unsafe-fixes)."
    assert any(" LL201 [*] " in line for line in lines)
    marked = run(["check", "--unsafe-fixes", "--output-format", "concise", str(path)]).output
    assert " LL101 [*] " in marked
    assert marked.splitlines()[-1] == "[*] 2 fixable with --fix."


def test_safe_fixes_only_without_unsafe_flag(tmp_path: Path) -> None:
    path = write(tmp_path, DISTRIBUTED)
    result = run(["fix", str(path)])
    assert result.exit_code == 1  # LL101 remains
    text = path.read_text()
    assert "DistributedSampler" not in text and "shuffle=True, pin_memory=True, num_workers=3)" in text
    assert result.output.splitlines()[-1] == "No safe fixes available (1 unsafe fix available with --unsafe-fixes)."
    result = run(["fix", "--unsafe-fixes", str(path)])
    assert result.exit_code == 0, result.output
    text = path.read_text()
    assert "from torch.utils.data.distributed import DistributedSampler\n" in text
    assert "sampler=DistributedSampler(dataset, shuffle=True)" in text and "shuffle=True," not in text
    assert "    loader.sampler.set_epoch(epoch)\n    for batch in loader:" in text


def test_json_carries_fixes(tmp_path: Path) -> None:
    path = write(tmp_path, SIMPLE)
    result = run(["check", "--output-format", "json", str(path)])
    data = json.loads(result.output)
    assert [d["code"] for d in data] == ["LL201", "LL202"]
    fix = data[0]["fix"]
    assert set(fix) == {"applicability", "message", "edits"}
    assert fix["applicability"] == "safe" and fix["message"] == "Set `num_workers=3`"
    [edit] = fix["edits"]
    assert edit == {
        "content": "DataLoader(dataset, batch_size=64, num_workers=3)",
        "location": {"row": 3, "column": 10},
        "end_location": {"row": 3, "column": 44},
    }


def test_diff_writes_nothing_and_exits_1(tmp_path: Path) -> None:
    path = write(tmp_path, SIMPLE)
    result = run(["fix", "--diff", str(path)])
    assert result.exit_code == 1
    assert path.read_text() == SIMPLE
    assert result.stdout.startswith(f"--- a/{path}\n+++ b/{path}\n@@ -1,5 +1,5 @@\n")
    assert "-loader = DataLoader(dataset, batch_size=64)\n" in result.stdout
    assert "+loader = DataLoader(dataset, batch_size=64, num_workers=3, pin_memory=True)\n" in result.stdout
    assert result.stderr == "Would fix 2 problems.\n"
    run(["fix", str(path)])
    clean = run(["fix", "--diff", str(path)])
    assert clean.exit_code == 0 and clean.stdout == ""


def test_show_fixes_lists_what_was_fixed(tmp_path: Path) -> None:
    path = write(tmp_path, SIMPLE)
    result = run(["fix", "--show-fixes", str(path)])
    assert result.exit_code == 0
    assert result.output == (
        "\n"
        "Fixed 2 problems:\n"
        f"- {path}:\n"
        "    1 × LL201 (synchronous-loading)\n"
        "    1 × LL202 (missing-pin-memory)\n"
        "\n"
        "Found 2 problems (2 fixed, 0 remaining).\n"
    )


def test_exit_non_zero_on_fix(tmp_path: Path) -> None:
    path = write(tmp_path, SIMPLE)
    assert run(["fix", "--exit-non-zero-on-fix", str(path)]).exit_code == 1
    # Nothing left to fix: back to 0.
    assert run(["fix", "--exit-non-zero-on-fix", str(path)]).exit_code == 0


def test_stdin_fix_writes_the_fixed_source_to_stdout() -> None:
    result = run(["fix", "-", "--stdin-filename", "train.py"], stdin=SIMPLE.encode())
    assert result.exit_code == 0
    assert result.stdout == SIMPLE.replace("batch_size=64)", "batch_size=64, num_workers=3, pin_memory=True)")
    assert "Found 2 problems (2 fixed, 0 remaining)." in result.stderr


def test_stdin_diff() -> None:
    result = run(["fix", "--diff", "-", "--stdin-filename", "train.py"], stdin=SIMPLE.encode())
    assert result.exit_code == 1
    assert result.stdout.startswith("--- a/train.py\n+++ b/train.py\n")


def test_stdin_fix_echoes_the_source_when_fixing_fails(monkeypatch) -> None:
    monkeypatch.setattr("loadlint.engine.fixes.apply_edits", lambda text, edits: text + "def (:\n")
    result = run(["fix", "-", "--stdin-filename", "train.py"], stdin=SIMPLE.encode())
    assert result.exit_code == 1
    assert result.stdout == SIMPLE
    assert "fixed code does not parse" in result.stderr


# -- never lose code ------------------------------------------------------------------


def test_unparsable_result_leaves_the_file_untouched(tmp_path: Path, monkeypatch) -> None:
    path = write(tmp_path, SIMPLE)
    monkeypatch.setattr("loadlint.engine.fixes.apply_edits", lambda text, edits: text.replace("DataLoader(", "DataLoader((", 1))
    result = run(["fix", str(path)])
    assert result.exit_code == 1
    assert path.read_bytes() == SIMPLE.encode()
    assert f"{path}: error: fixed code does not parse (ParserSyntaxError); file left unchanged" in result.output
    # The findings of the untouched file are still reported.
    assert "LL201" in result.output


def test_diff_reports_a_file_that_cannot_be_fixed(tmp_path: Path, monkeypatch) -> None:
    path = write(tmp_path, SIMPLE)
    monkeypatch.setattr("loadlint.engine.fixes.apply_edits", lambda text, edits: text + "(\n")
    result = run(["fix", "--diff", str(path)])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "error: fixed code does not parse" in result.stderr


def test_new_finding_withholds_only_its_fix(monkeypatch) -> None:
    real = engine.analyse

    def analyse(text, path, options, **kw):
        findings, analysis = real(text, path, options, **kw)
        if "num_workers=3" in text:
            crash = Finding("LL001", "prefetch-without-workers", "boom", path, Location(3, 1), Location(3, 2))
            findings = [*findings, crash]
        return findings, analysis

    monkeypatch.setattr(engine, "analyse", analyse)
    # Only the fix that introduces the finding is withheld, with its reason;
    # the other fix on the same call still applies.
    fixed, remaining, applied = fix(SIMPLE)
    assert "pin_memory=True" in fixed and "num_workers" not in fixed
    assert applied == {"LL202": 1}
    [left] = [f for f in remaining if f.code == "LL201"]
    assert left.fix is None
    assert left.fix_withheld == "no fix: set `num_workers=3` would introduce LL001 (prefetch-without-workers): boom"


def test_crash_check_counts_occurrences() -> None:
    one = Finding("LL001", "x", "m", "p", Location(1, 1), Location(1, 2))
    two = Finding("LL001", "x", "m", "p", Location(5, 1), Location(5, 2))
    engine.check_no_new_crash([one], [two])  # moved, not new
    with pytest.raises(FixFailed):
        engine.check_no_new_crash([one], [one, two])


def test_read_only_file_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path, SIMPLE)
    path.chmod(0o444)
    result = run(["fix", str(path)])
    assert result.exit_code == 1
    assert f"{path}: error: cannot write fixes: file is read-only" in result.output
    assert path.read_text() == SIMPLE
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".loadlint-tmp")]


def test_mode_is_kept(tmp_path: Path) -> None:
    path = write(tmp_path, SIMPLE)
    path.chmod(0o640)
    run(["fix", str(path)])
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert path.read_text() != SIMPLE


def test_symlink_target_is_fixed_and_link_kept(tmp_path: Path) -> None:
    real = write(tmp_path, SIMPLE, "real.py")
    link = tmp_path / "link.py"
    link.symlink_to(real)
    run(["fix", str(link)])
    assert link.is_symlink()
    assert "num_workers=3" in real.read_text()


def test_file_changed_on_disk_is_not_overwritten(tmp_path: Path) -> None:
    path = write(tmp_path, "mine\n")
    with pytest.raises(FileChanged):
        write_atomic(path, b"what we read\n", b"fixed\n")
    assert path.read_bytes() == b"mine\n"
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"]


def test_file_changed_during_fix_is_reported(tmp_path: Path, monkeypatch) -> None:
    path = write(tmp_path, SIMPLE)
    real = engine.fix_text

    def racing(*args, **kwargs):
        out = real(*args, **kwargs)
        path.write_text(SIMPLE + "# edited meanwhile\n")
        return out

    monkeypatch.setattr("loadlint.engine.pipeline.fix_text", racing)
    result = run(["fix", str(path)])
    assert result.exit_code == 1
    assert "file changed on disk while it was being fixed; not written" in result.output
    assert path.read_text().endswith("# edited meanwhile\n")


def test_crlf_inserted_lines_use_the_files_newline(tmp_path: Path) -> None:
    path = tmp_path / "t.py"
    path.write_bytes(DISTRIBUTED.replace("\n", "\r\n").encode())
    run(["fix", "--unsafe-fixes", str(path)])
    data = path.read_bytes()
    assert b"DistributedSampler\r\n" in data and b"set_epoch(epoch)\r\n" in data
    assert b"\n" not in data.replace(b"\r\n", b"")


def test_bom_and_latin1_survive_the_cli(tmp_path: Path) -> None:
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbf" + SIMPLE.encode())
    latin = tmp_path / "latin.py"
    latin.write_bytes(("# -*- coding: latin-1 -*-\n# é\n" + SIMPLE).encode("latin-1"))
    run(["fix", str(bom), str(latin)])
    assert bom.read_bytes().startswith(b"\xef\xbb\xbf") and b"num_workers=3" in bom.read_bytes()
    assert b"# \xe9\n" in latin.read_bytes() and b"num_workers=3" in latin.read_bytes()


def test_idempotent_on_the_example(tmp_path: Path) -> None:
    example = Path(__file__).parents[1] / "examples" / "train_ddp.py"
    path = write(tmp_path, example.read_text())
    first = run(["fix", "--unsafe-fixes", str(path)])
    assert first.exit_code == 0, first.output
    once = path.read_bytes()
    second = run(["fix", "--unsafe-fixes", str(path)])
    assert path.read_bytes() == once
    assert second.output == "All checks passed!\n"
    check = run(["check", "--unsafe-fixes", "--output-format", "json", str(path)])
    assert json.loads(check.output) == []


# -- rule fixes in realistic layouts ----------------------------------------------------


def test_ll201_unsafe_when_a_lambda_must_be_pickled() -> None:
    spawn = HardwareProfile(usable_cpus=4, gpu_count=0, platform="macos", python="3.11",
                            declared=frozenset({"cpus", "gpus", "platform", "python"}))
    src = "from torch.utils.data import DataLoader\nloader = DataLoader(ds, collate_fn=lambda b: b)\n"
    findings, _ = engine.analyse(src, "x.py", Options(frozenset({"LL201"}), lambda: spawn))
    [finding] = findings
    assert finding.fix is not None and finding.fix.applicability == "unsafe"
    assert "lambda" in finding.fix.message and "unsafe" in finding.fix.message
    fixed, _, _ = fix(src, unsafe=False, select={"LL201"}, profile=spawn)
    assert fixed == src
    # On Linux with Python 3.11 workers fork: nothing needs pickling, the fix is safe.
    fixed, _, _ = fix(src, unsafe=False, select={"LL201"})
    assert "num_workers=" in fixed


def test_ll203_shared_cpu_count_is_replaced_once() -> None:
    src = (
        "import os\nimport torch.distributed as dist\nfrom torch.utils.data import DataLoader\n"
        "W = os.cpu_count()\ndist.init_process_group('gloo')\n"
        "a = DataLoader(ds, sampler=s, num_workers=W)\nb = DataLoader(ds, sampler=t, num_workers=W)\n"
    )
    fixed, remaining, applied = fix(src, select={"LL203"})
    assert fixed.count("LOADER_WORKERS = ") == 1
    assert "W = LOADER_WORKERS\n" in fixed
    assert fixed.count("import os") == 1
    assert applied == {"LL203": 2} and remaining == []


def test_ll101_two_loaders_in_one_epoch_loop() -> None:
    src = (
        "import torch.distributed as dist\nfrom torch.utils.data import DataLoader\n"
        "dist.init_process_group('gloo')\n"
        "a = DataLoader(ds, num_workers=1)\nb = DataLoader(vs, num_workers=1)\n"
        "for ep in range(2):\n    for x in a:\n        pass\n    for y in b:\n        pass\n"
    )
    fixed, remaining, _ = fix(src, select={"LL101"})
    assert fixed.count("from torch.utils.data.distributed import DistributedSampler") == 1
    assert "for ep in range(2):\n    a.sampler.set_epoch(ep)\n    b.sampler.set_epoch(ep)\n" in fixed
    assert remaining == []


def test_all_fixes_on_one_call_are_one_edit() -> None:
    from loadlint.engine.fixes import Builder

    src = DISTRIBUTED.replace("pin_memory=True", "num_workers=0").replace("step(batch)", "batch.cuda()")
    findings, analysis = engine.analyse(src, "x.py", Options(CORE, lambda: PROFILE))
    assert {f.code for f in findings} == {"LL101", "LL201", "LL202"}
    specs = [r.fix for _, r in analysis.reports]
    edits = Builder(analysis.module, analysis.positions).edits(specs)
    call_edits = [e for e in edits if e.start != e.end]
    assert len(call_edits) == 1
    assert call_edits[0].content == (
        "DataLoader(dataset, batch_size=64, sampler=DistributedSampler(dataset, shuffle=True), "
        "num_workers=3, pin_memory=True)"
    )


# -- --from-verify ----------------------------------------------------------------------

VERIFIED = """\
from torch.utils.data import DataLoader

loader = DataLoader(dataset, batch_size=8, num_workers=4, prefetch_factor=4)
other = DataLoader(
    dataset,
    batch_size=8,  # fits in memory
)
third = DataLoader(dataset, batch_size=8, num_workers=2)
"""


def report(tmp_path: Path, sites: list[dict]) -> Path:
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"schema": "loadlint.verify/1", "call_sites": sites}))
    return path


SITES = [
    {"file": "train.py", "line": 3, "end_line": 3, "verdict": "confirmed",
     "best": {"num_workers": 2, "persistent_workers": True}, "removed": ["prefetch_factor"]},
    {"file": "train.py", "line": 4, "end_line": 7, "verdict": "confirmed",
     "best": {"num_workers": 1, "multiprocessing_context": "spawn"}},
    {"file": "train.py", "line": 8, "end_line": 8, "verdict": "refuted", "best": {"num_workers": 9}},
]


def test_from_verify_applies_confirmed_sites(tmp_path: Path, monkeypatch) -> None:
    path = write(tmp_path, VERIFIED)
    rep = report(tmp_path, SITES)
    monkeypatch.chdir(tmp_path)
    result = run(["fix", "--from-verify", str(rep), "--show-fixes"])
    assert result.exit_code == 0, result.output
    assert path.read_text() == """\
from torch.utils.data import DataLoader

loader = DataLoader(dataset, batch_size=8, num_workers=2, persistent_workers=True)
other = DataLoader(
    dataset,
    batch_size=8,  # fits in memory
    num_workers=1,
    multiprocessing_context="spawn",
)
third = DataLoader(dataset, batch_size=8, num_workers=2)
"""
    assert "2 × verify (measured-configuration)" in result.stdout
    assert "train.py:8: verdict 'refuted', nothing to apply" in result.stderr
    # Applying the same report again changes nothing.
    again = run(["fix", "--from-verify", str(rep), "--diff"])
    assert again.exit_code == 0 and again.stdout == ""


def test_from_verify_diff_writes_nothing(tmp_path: Path, monkeypatch) -> None:
    path = write(tmp_path, VERIFIED)
    rep = report(tmp_path, SITES[:1])
    monkeypatch.chdir(tmp_path)
    result = run(["fix", "--from-verify", str(rep), "--diff"])
    assert result.exit_code == 1
    assert "+loader = DataLoader(dataset, batch_size=8, num_workers=2, persistent_workers=True)\n" in result.stdout
    assert path.read_text() == VERIFIED


def test_from_verify_refuses_a_file_that_moved(tmp_path: Path, monkeypatch) -> None:
    path = write(tmp_path, "# a line added since verify ran\n" + VERIFIED)
    rep = report(tmp_path, SITES[1:2])
    monkeypatch.chdir(tmp_path)
    result = run(["fix", "--from-verify", str(rep)])
    assert result.exit_code == 1
    assert "no longer ends at line 7; the file changed since it was verified" in result.output
    assert path.read_text().startswith("# a line added")
    assert "num_workers=1" not in path.read_text()


def test_from_verify_rejects_a_bad_report(tmp_path: Path) -> None:
    bad = tmp_path / "report.json"
    bad.write_text("{}")
    result = run(["fix", "--from-verify", str(bad)])
    assert result.exit_code == 2
    assert "not a loadlint verify report" in result.output


def test_an_added_import_goes_after_imports_interleaved_with_set_up() -> None:
    # ``sys.path`` set up between imports (or any simple statement first):
    # the new import joins the last one before the first definition.
    text = DISTRIBUTED.replace(
        "import torch.distributed as dist\n", '"""Train."""\nimport sys\nsys.path.insert(0, "src")\nimport torch.distributed as dist\n'
    )
    fixed, _, _ = fix(text, select=frozenset({"LL101"}))
    assert fixed.splitlines()[:6] == [
        '"""Train."""',
        "import sys",
        'sys.path.insert(0, "src")',
        "import torch.distributed as dist",
        "from torch.utils.data import DataLoader",
        "from torch.utils.data.distributed import DistributedSampler",
    ]
