"""One escaping rule for every line loadlint prints (docs/security.md).

A hostile repository chooses file names, source lines, configuration keys
and the strings of a trace.  Whatever it puts there, no line loadlint prints
may start a GitHub workflow command (``::`` at a line's start after blanks;
``##[`` anywhere in a line) or reach a terminal as a control character, a
bidirectional control or a Unicode line separator; the JSON and XML formats
stay valid and keep the values.  Each test feeds one surface its hostile
forms and reads every line of stdout and stderr.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadlint.frontends.cli import main
from loadlint.sources.source import visible

TARGET = "cpus=4,gpus=1"
BASIC = (Path(__file__).parent / "fixtures" / "basic.py").read_bytes()
FORMATS = ["full", "concise", "json", "json-lines", "sarif", "github", "gitlab", "junit", "pylint"]
OSC = "\x1b]52;c;aGk=\x07"  # writes the clipboard
CSI = "\x1b[2J\x9b1m"  # clears the screen; C1's one-byte CSI
BIDI = "\u202e\u2066\u2028"  # reorders what is shown; a Unicode line separator

# GitHub's own annotation lines, in the github format: the properties have
# their ``:`` escaped, so the command ends at the first ``::`` after them.
_ANNOTATION = re.compile(r"^::(?:error|warning|notice) [^:]*::")
_COMMAND = re.compile(r"^\s*::")


def _acted_on(char: str) -> bool:
    if char == "\t":
        return False
    return unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp", "Cs") or char in "\ufffe\uffff"


def hijacks(text: str, *, github: bool = False) -> list[str]:
    """The lines of ``text`` a CI runner or a terminal would act on."""
    bad = []
    for line in text.split("\n"):
        body = line[:-1] if line.endswith("\r") else line
        data = _ANNOTATION.sub("", body, count=1) if github else body
        if _COMMAND.match(data) or "##[" in body or any(_acted_on(c) for c in body):
            bad.append(line)
    return bad


def test_every_invisible_character_is_escaped():
    # The whole Unicode database of this Python, not a list copied from the rule.
    acted_on = [chr(c) for c in range(sys.maxunicode + 1) if _acted_on(chr(c)) and unicodedata.category(chr(c)) != "Cs"]
    assert len(acted_on) > 200
    shown = [c for c in acted_on if visible(c) == c]
    assert shown == []
    assert visible("\t") == "\t" and visible("caf\u00e9 \u4e2d") == "caf\u00e9 \u4e2d"
    assert visible("\udcff") == "\udcff" and visible("\udcff", strict=True) == "\\udcff"


@given(st.text(alphabet=st.sampled_from(["#", "[", ":", " ", "\t", "\u00a0", "\n", "\r", "\x1b", "\u00ad", "\u2028", "a", "\\"])))
@settings(max_examples=300, deadline=None)
def test_the_rule_on_any_text(text):
    from loadlint.sources.source import visible_json, visible_lines

    once = visible(text)
    assert visible(once) == once
    assert hijacks(once) == []
    serialized = visible_json(json.dumps({"k": text, text: [text]}, ensure_ascii=False, indent=1))
    assert json.loads(serialized) == {"k": text, text: [text]}
    assert hijacks(serialized) == []
    for body in visible_lines(text).splitlines():
        assert hijacks(body) == []


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """``loadlint ARGV`` in this process: the exit code and stdout+stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out + err


def no_constants(name: str) -> Any:
    raise AssertionError(f"{name} is not JSON")


def loads(text: str) -> Any:
    return json.loads(text, parse_constant=no_constants)


def check_every_format(capsys, *args: str) -> dict[str, str]:
    """``check`` in each format: every line clean, every document valid."""
    outputs = {}
    for fmt in FORMATS:
        code, out = run(capsys, "check", "--no-cache", "-j", "1", "--target", TARGET, "--output-format", fmt, *args)
        assert code == 1, (fmt, out)
        assert hijacks(out, github=fmt == "github") == [], fmt
        if fmt in ("json", "sarif", "gitlab"):
            loads(out)
        elif fmt == "json-lines":
            for line in out.splitlines():
                loads(line)
        elif fmt == "junit":
            ET.fromstring(out.encode("utf-8"))
        outputs[fmt] = out
    return outputs


@pytest.mark.parametrize(
    "name",
    [
        "::stop-commands::tok.py",
        " \t::error title=Injected::x.py",
        "##[error]x.py",
        f"{OSC}{CSI}x.py",
        f"{BIDI}x.py",
    ],
    ids=["command", "blank-command", "legacy-command", "escape-sequences", "bidi"],
)
def test_file_name_in_every_format(capsys, tmp_path, monkeypatch, name):
    (tmp_path / name).write_bytes(BASIC)
    monkeypatch.chdir(tmp_path)
    outputs = check_every_format(capsys, ".")
    # The finding is reported, under the file's own name where JSON keeps it.
    assert {f["filename"] for f in loads(outputs["json"])} == {name}
    assert loads(outputs["gitlab"])[0]["location"]["path"] == name
    assert any(line.endswith(".py:6: [LL201] `num_workers` is not set: batches are loaded in the training process, "
                             "the accelerator waits; use `num_workers=3` (target: 4 CPUs, 1 GPU)")
               for line in outputs["pylint"].splitlines())


def test_every_case_at_once_through_the_console(tmp_path):
    # The real process: stdout a pipe, bytes as a CI log reads them.
    names = ["::stop-commands::tok.py", " \t::error title=Injected::x.py", "##[error]x.py", f"{OSC}{CSI}x.py", f"{BIDI}x.py"]
    for name in names:
        (tmp_path / name).write_bytes(BASIC)
    doc = f'DOC = """\n##[error]y{OSC}\n::error title=Injected::x\n"""\n'
    (tmp_path / "train.py").write_text(BASIC.decode().replace("def train(model, dataset, epochs=3):\n", f"def train(model, dataset, epochs=3):\n    {doc}"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOADLINT_")}
    for args in (["--output-format", "full"], ["--output-format", "github"], ["--diff"]):
        proc = subprocess.run([sys.executable, "-m", "loadlint", "check", "--no-cache", "--target", TARGET, *args, "."],
                              cwd=tmp_path, capture_output=True, env=env, timeout=180)
        text = (proc.stdout + proc.stderr).decode("utf-8", "surrogateescape")
        assert proc.returncode == 1 and "Traceback" not in text, text
        assert hijacks(text, github="github" in args) == [], args
        # Every file is reported (quoted or annotated), none lost to the escaping.
        expected = "title=loadlint (LL201)" if "github" in args else "DataLoader(dataset, batch_size=32"
        assert text.count(expected) >= len(names) + 1, args


HOSTILE_LINE = (
    f'    loader = DataLoader(dataset, batch_size=32, multiprocessing_context="{OSC}{CSI} ##[error]x {BIDI}")'
    f"  # ##[warning]{OSC}\n"
)


def test_source_line_and_message_in_every_format(capsys, tmp_path, monkeypatch):
    # The flagged line is shown by `full`; its string literal is quoted in the message of every format.
    text = BASIC.decode().replace("    loader = DataLoader(dataset, batch_size=32, shuffle=True)\n", HOSTILE_LINE)
    (tmp_path / "train.py").write_text(text)
    monkeypatch.chdir(tmp_path)
    outputs = check_every_format(capsys, "train.py")
    shown = r'"\x1b]52;c;aGk=\x07\x1b[2J\x9b1m \x23#[error]x \u202e\u2066\u2028"'
    assert f"6 |     loader = DataLoader(dataset, batch_size=32, multiprocessing_context={shown})" in outputs["full"]
    (ll009,) = [f for f in loads(outputs["json"]) if f["code"] == "LL009"]
    # JSON escapes differently but keeps the value.
    assert f'"{OSC}{CSI} ##[error]x {BIDI}"' in ll009["message"]
    assert "\\u0023#[error]" in outputs["json"]


def test_fix_diff_body(capsys, tmp_path, monkeypatch):
    # Context lines of the diff: the runner trims the leading blank of " ::error ...".
    doc = f'DOC = """\n##[error]y{OSC}{CSI}{BIDI}\n::error title=Injected::x\n"""\n'
    (tmp_path / "train.py").write_text(BASIC.decode().replace("def train(model, dataset, epochs=3):\n", f"def train(model, dataset, epochs=3):\n    {doc}"))
    monkeypatch.chdir(tmp_path)
    code, out = run(capsys, "check", "--no-cache", "-j", "1", "--target", TARGET, "--diff", "train.py")
    assert code == 1 and hijacks(out) == []
    assert "\n \\x23#[error]y\\x1b]52;c;aGk=\\x07\\x1b[2J\\x9b1m\\u202e\\u2066\\u2028\n \\x3a:error title=Injected::x\n" in out
    assert re.search(r"\n\+    loader = DataLoader\(dataset, batch_size=32, shuffle=True, num_workers=3, [^\n]*\)\n", out)


def test_fix_diff_keeps_crlf_line_endings(capsys, tmp_path, monkeypatch):
    text = BASIC.replace(b"epochs=3):", f"epochs=3):  # ::x{OSC}".encode()).replace(b"\n", b"\r\n")
    (tmp_path / "train.py").write_bytes(text)
    monkeypatch.chdir(tmp_path)
    code, out = run(capsys, "check", "--no-cache", "-j", "1", "--target", TARGET, "--diff", "train.py")
    assert code == 1 and hijacks(out) == []
    assert "\n def train(model, dataset, epochs=3):  # ::x\\x1b]52;c;aGk=\\x07\r\n" in out
    assert re.search(r"\n\+    loader = DataLoader\(dataset, batch_size=32, shuffle=True, num_workers=3, [^\n]*\)\r\n", out)


def test_add_noqa_names_a_read_only_file_escaped(capsys, tmp_path, monkeypatch):
    name = f"::x##[error]{OSC}.py"
    (tmp_path / name).write_bytes(BASIC)
    (tmp_path / name).chmod(0o444)
    monkeypatch.chdir(tmp_path)
    code, out = run(capsys, "check", "--no-cache", "-j", "1", "--target", TARGET, "--add-noqa", name)
    assert code == 0 and hijacks(out) == []
    assert r"\x3a:x\x23#[error]\x1b]52;c;aGk=\x07.py: error: cannot write fixes: file is read-only" in out.splitlines()


def flake8(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOADLINT_")}
    return subprocess.run([sys.executable, "-m", "flake8", "--select", "LL", *args], cwd=cwd, capture_output=True,
                          text=True, errors="surrogateescape", env=env, timeout=120)


def test_flake8_messages(tmp_path):
    (tmp_path / "train.py").write_text(BASIC.decode().replace("    loader = DataLoader(dataset, batch_size=32, shuffle=True)\n",
                                                              HOSTILE_LINE))
    proc = flake8(tmp_path, "train.py")
    assert proc.returncode == 1, proc.stderr
    assert hijacks(proc.stdout + proc.stderr) == []
    assert r'multiprocessing_context="\x1b]52;c;aGk=\x07\x1b[2J\x9b1m \x23#[error]x \u202e\u2066\u2028"' in proc.stdout


def test_flake8_configuration_key_holding_a_line_break(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.loadlint]\n"x\\n::error title=Injected::y" = 1\n')
    (tmp_path / "train.py").write_bytes(BASIC)
    proc = flake8(tmp_path, "train.py")
    assert proc.returncode == 1, proc.stderr
    assert hijacks(proc.stdout + proc.stderr) == []
    (line,) = proc.stdout.splitlines()
    assert line.startswith("train.py:1:1: LL000 loadlint configuration error: ") and r"x\x0a::error title=Injected::y" in line


def test_configuration_shown_by_show_settings(capsys, tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.loadlint.per-file-ignores]\n"##[error]\\u001b]0;x\\u0007*.py" = ["LL201"]\n'
    )
    (tmp_path / "train.py").write_bytes(BASIC)
    monkeypatch.chdir(tmp_path)
    code, out = run(capsys, "check", "--show-settings", "train.py")
    assert code == 0 and hijacks(out) == []
    assert "\\x23#[error]" in out


def test_error_lines_name_paths_escaped(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out = run(capsys, "check", f"##[error]{OSC}missing.py")
    assert code == 2 and hijacks(out) == []
    assert out == "loadlint: error: \\x23#[error]\\x1b]52;c;aGk=\\x07missing.py: no such file or folder\n"


@pytest.mark.parametrize("command", [["check", "--no-cache", "train.py"], ["hardware"], ["hardware", "--json"]])
def test_configuration_key_in_the_error_line(capsys, tmp_path, monkeypatch, command):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.loadlint.target]\ncpus = 4\n"##[error]\\u001b]0;x\\u0007\\n::error title=Injected::y" = 1\n'
    )
    (tmp_path / "train.py").write_bytes(BASIC)
    monkeypatch.chdir(tmp_path)
    code, out = run(capsys, *command)
    assert code == 2 and hijacks(out) == []
    assert out.endswith(": [tool.loadlint.target]: unknown key '\\x23#[error]\\x1b]0;x\\x07\\n::error title=Injected::y' "
                        "(allowed: cpus, gpus, memory, shm, platform, python, torch)\n")
    assert out.count("\n") == 1


def test_cache_refusal_names_the_folder_escaped(capsys, tmp_path, monkeypatch):
    project = tmp_path / f"##[error]{OSC}proj"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.loadlint]\n")
    (project / "train.py").write_bytes(BASIC)
    (tmp_path / "elsewhere").mkdir()
    (project / ".loadlint_cache").symlink_to(tmp_path / "elsewhere")
    monkeypatch.chdir(project)
    code, out = run(capsys, "check", "-j", "1", "--target", TARGET, "train.py")
    assert code == 1 and hijacks(out) == []
    assert r"\x23#[error]\x1b]52;c;aGk=\x07proj/.loadlint_cache is a link; running without a cache" in out


def test_junit_is_well_formed_for_any_file_name(capsys, tmp_path, monkeypatch):
    for name in (b"nonchar\xef\xbf\xbe\xef\xbf\xbf.py", b"undecodable\xff.py"):
        with open(os.path.join(os.fsencode(tmp_path), name), "wb") as handle:
            handle.write(BASIC)
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "out" / "junit.xml"
    assert main(["check", "--no-cache", "-j", "1", "--target", TARGET, "--output-format", "junit", "-o", str(report), "."]) == 1
    capsys.readouterr()
    suites = ET.fromstring(report.read_bytes())
    names = sorted(suite.get("name") or "" for suite in suites)
    assert names == ["nonchar\\ufffe\\uffff.py", "undecodable\\udcff.py"]


# -- trace ------------------------------------------------------------------

NEXT = "enumerate(DataLoader)#_SingleProcessDataLoaderIter{}.__next__"


def _event(name: str, ts: float, dur: float, cat: str = "user_annotation", pid: int = 100, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": 100, "ts": ts, "dur": dur, "args": args}


def hostile_trace(marker: str) -> dict[str, Any]:
    """Six steps that wait for a loader in the training process, with the
    repository's strings in the device name, the iterator class and the
    stack frames."""
    events = []
    for i in range(6):
        t = 1_000_000.0 + i * 10_000
        events.append(_event(f"ProfilerStep#{i}", t, 10_000))
        events.append(_event(NEXT.format(""), t + 10, 6_000))
        events.append(_event(f"train.py(6): main{marker}", t, 7_000, cat="python_function"))
        events.append(_event("cudaMemcpyAsync", t + 6_050, 30, cat="cuda_runtime", correlation=i))
        events.append(_event("Memcpy HtoD (Pageable -> Device)", t + 6_070, 400, cat="gpu_memcpy", pid=0, correlation=i,
                             bytes=8 << 20, device=0))
        events.append(_event("volta_sgemm", t + 6_500, 3_000, cat="kernel", pid=0))
    # A second iterator class, named by the repository (a subclass).
    events.append(_event(NEXT.format(marker), 1_059_000.0, 10))
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": f"NVIDIA H200{marker}"}], "traceEvents": events}


TRAIN = """\
from torch.utils.data import DataLoader
from data import make_dataset

def main():
    loader = DataLoader(make_dataset(), batch_size=32, multiprocessing_context="{marker}")
    for x, y in loader:
        step(x.cuda(), y.cuda())

if __name__ == "__main__":
    main()
"""


def test_trace_text_output(capsys, tmp_path, monkeypatch):
    marker = f"{OSC}{CSI} ##[error]{BIDI}"
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "train.py").write_text(TRAIN.format(marker=marker))
    name = f"::stop-commands::{OSC}.json.gz"
    (tmp_path / name).write_bytes(gzip.compress(json.dumps(hostile_trace(marker)).encode()))
    monkeypatch.chdir(tmp_path)
    code, out = run(capsys, "trace", name, "--source", "proj")
    assert hijacks(out) == [] and code == 1, out
    shown = r"\x1b]52;c;aGk=\x07\x1b[2J\x9b1m \x23#[error]\u202e\u2066\u2028"
    header = out.splitlines()[0]
    assert header.startswith(r"\x3a:stop-commands::\x1b]52;c;aGk=\x07.json.gz (NVIDIA H200" + shown)
    assert header.endswith(f", 6 steps, _SingleProcessDataLoaderIter, _SingleProcessDataLoaderIter{shown})")
    assert any(line.startswith("  = static: proj/train.py:5:") and shown in line for line in out.splitlines())
    code, out = run(capsys, "trace", name, name, "--compare")
    assert hijacks(out) == []


# -- verify (its report, without running anything) --------------------------


def test_verify_text_and_json_reports():
    from loadlint.verify.report import render_json
    from loadlint.verify.text import render_ddp_text

    marker = f"::error title=Injected::x\n##[error]{OSC}{BIDI}"
    report = {
        "mode": "ddp",
        "notes": [marker],
        "distributed": {
            "call": {"file": f"{marker}.py", "line": 3, "end_line": 3},
            "simulated": True,
            "simulated_reason": marker,
            "nproc": 2,
            "sampler": marker,
            "checks": [{"status": "fail", "name": marker, "evidence": marker}],
            "verdict": "fail",
        },
    }
    text = render_ddp_text(report)
    assert hijacks(text) == []
    assert "note: ::error title=Injected::x\\x0a\\x23#[error]\\x1b]52;c;aGk=\\x07\\u202e\\u2066\\u2028\n" in text
    serialized = render_json(report)
    assert hijacks(serialized) == [] and loads(serialized) == report
