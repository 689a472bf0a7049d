"""``loadlint trace`` on hostile input, continued: every line it prints
besides the report (its JSON, errors, notes, warnings and the ``--fix``
diff) holds to the one escaping rule, ``monitor``'s and ``verify``'s
command lines too, and a rank pool whose worker dies is finished in
process rather than ending the run as an internal error.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import unicodedata
from pathlib import Path
from typing import Any, Iterator

import pytest

from loadlint.frontends.cli import main

OSC = "\x1b]52;c;aGk=\x07"  # writes the clipboard
CSI = "\x1b[2J\x9b1m"  # clears the screen; C1's one-byte CSI
BIDI = "\u202e\u2066\u2028"  # reorders what is shown; a Unicode line separator
MARKER = f"{OSC}{CSI} ##[error]{BIDI}"
SHOWN = r"\x1b]52;c;aGk=\x07\x1b[2J\x9b1m \x23#[error]\u202e\u2066\u2028"
NEXT = "enumerate(DataLoader)#_SingleProcessDataLoaderIter{}.__next__"
_COMMAND = re.compile(r"^\s*::")


def hijacks(text: str) -> list[str]:
    """The lines of ``text`` a CI runner or a terminal would act on."""
    def acted_on(char: str) -> bool:
        return char != "\t" and (unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp", "Cs") or char in "\ufffe\uffff")

    return [line for line in text.split("\n") if _COMMAND.match(line) or "##[" in line or any(map(acted_on, line))]


def event(name: str, ts: float, dur: float, cat: str = "user_annotation", pid: int = 100, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": 100, "ts": ts, "dur": dur, "args": args}


def hostile_trace(marker: str, *, gpu: bool = True, frame: str | None = "train.py(6): main") -> dict[str, Any]:
    """Six steps waiting for a loader, the repository's strings in the device
    name, an iterator class and a stack frame."""
    events = []
    for i in range(6):
        t = 1_000_000.0 + i * 10_000
        events.append(event(f"ProfilerStep#{i}", t, 10_000))
        events.append(event(NEXT.format(""), t + 10, 6_000))
        if frame is not None:
            events.append(event(f"{frame}{marker}", t, 7_000, cat="python_function"))
        if gpu:
            events.append(event("volta_sgemm", t + 6_500, 3_000, cat="kernel", pid=0))
    events.append(event(NEXT.format(marker), 1_059_000.0, 10))
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": f"NVIDIA H200{marker}"}], "traceEvents": events}


def write(path: Path, trace: dict[str, Any]) -> Path:
    path.write_bytes(gzip.compress(json.dumps(trace).encode()))
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["trace", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def no_constants(name: str) -> Any:
    raise AssertionError(f"{name} is not JSON")


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


# -- every line trace prints ---------------------------------------------------


@pytest.mark.parametrize("compare", [False, True])
def test_json_report_escapes_workflow_commands_and_keeps_the_values(capsys, tmp_path, monkeypatch, compare):
    monkeypatch.chdir(tmp_path)
    name = write(tmp_path / "rank.json.gz", hostile_trace(MARKER)).name
    argv = ["--compare", name, name] if compare else [name]
    code, out, err = run(capsys, *argv, "--output-format", "json")
    assert code == 1 and err == "", err
    assert hijacks(out) == [] and "\\u0023#[error]" in out
    report = json.loads(out, parse_constant=no_constants)
    assert f"NVIDIA H200{MARKER}" in set(strings(report))


def test_error_line_escapes_the_path(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, f"##[error]{OSC}.json")
    assert (code, out) == (2, "")
    assert err == "loadlint: error: \\x23#[error]\\x1b]52;c;aGk=\\x07.json: no such file or folder\n"


def test_error_line_for_an_unreadable_trace_escapes_its_name(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / f"##[warning]{CSI}.json").write_text("{not json")
    code, out, err = run(capsys, f"##[warning]{CSI}.json")
    assert (code, out) == (2, "")
    assert err.startswith("loadlint: error: \\x23#[warning]\\x1b[2J\\x9b1m.json: ") and hijacks(err) == [] and err.count("\n") == 1


def test_note_for_a_trace_without_gpu_events_escapes_its_name(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name = write(tmp_path / f"##[warning]{BIDI}.json.gz", hostile_trace("", gpu=False)).name
    code, out, err = run(capsys, name)
    assert code == 1 and hijacks(out + err) == []
    assert err == "loadlint: note: \\x23#[warning]\\u202e\\u2066\\u2028.json.gz: no GPU events: GPU busy is not measured\n"


def test_warning_for_a_guessed_match_escapes_the_path(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    project = tmp_path / "proj"
    project.mkdir()
    call = "from torch.utils.data import DataLoader\n\nloader = DataLoader(range(8), batch_size=2)\n"
    (project / f"##[error]{OSC}.py").write_text(call)
    (project / "other.py").write_text(call)
    name = write(tmp_path / "rank.json.gz", hostile_trace("", frame=None)).name
    code, out, err = run(capsys, name, "--source", "proj", "--fix")
    assert code == 1 and hijacks(out + err) == [], err
    warning = [line for line in err.splitlines() if line.startswith("loadlint: warning: not fixing ")]
    assert warning == ["loadlint: warning: not fixing proj/\\x23#[error]\\x1b]52;c;aGk=\\x07.py:3: the match is a guess "
                       "(first of 2 DataLoader calls (without workers) that could be it); point --source at the training script"]


def test_fix_diff_escapes_the_source_lines(capsys, tmp_path, monkeypatch):
    # Context lines of the diff: the runner trims the leading blank of " ::error ...".
    monkeypatch.chdir(tmp_path)
    (tmp_path / "proj").mkdir()
    doc = f'    DOC = """\n##[error]{OSC}{CSI}{BIDI}\n::error title=Injected::x\n"""\n'
    basic = (Path(__file__).parent / "fixtures" / "basic.py").read_text()
    (tmp_path / "proj" / "train.py").write_text(basic.replace("epochs=3):\n", "epochs=3):\n" + doc, 1))
    name = write(tmp_path / "rank.json.gz", hostile_trace("", frame="train.py(5): train")).name
    code, out, err = run(capsys, name, "--source", "proj", "--fix", "--target", "cpus=4,gpus=1")
    assert code == 1 and re.search(r"^Fixed [1-9]\d* problems? ", err, re.M), err
    assert hijacks(out + err) == []
    assert "\n \\x23#[error]\\x1b]52;c;aGk=\\x07\\x1b[2J\\x9b1m\\u202e\\u2066\\u2028\n \\x3a:error title=Injected::x\n" in out


def test_no_match_warning_and_plot_line_escape_the_paths(capsys, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / f"##[group]{OSC}"
    folder.mkdir()
    name = write(tmp_path / "rank.json.gz", hostile_trace("")).name
    code, out, err = run(capsys, name, "--source", folder.name, "--plot", f"{folder.name}/p.png")
    assert code == 1 and hijacks(out + err) == [], err
    assert "loadlint: warning: no DataLoader call under \\x23#[group]\\x1b]52;c;aGk=\\x07 matches the traced loader" in err.splitlines()
    assert "loadlint: wrote \\x23#[group]\\x1b]52;c;aGk=\\x07/p.png" in err.splitlines()


# -- a rank pool whose worker dies ---------------------------------------------


def test_a_broken_rank_pool_is_finished_in_process(capsys, tmp_path, monkeypatch):
    from loadlint.trace import analyse

    monkeypatch.chdir(tmp_path)
    for rank in range(3):
        trace = hostile_trace("")
        trace["distributedInfo"] = {"rank": rank}
        write(tmp_path / f"rank{rank}.json.gz", trace)
    expected = run(capsys, "rank0.json.gz", "rank1.json.gz", "rank2.json.gz", "-j", "1")
    assert expected[0] == 1 and expected[2] == ""

    parent, real = os.getpid(), analyse.load

    def dies_in_a_worker(path: Path) -> Any:
        if os.getpid() != parent:
            os._exit(9)  # a worker killed mid-rank (out of memory, a signal)
        return real(path)

    # The pool forks on Linux: the workers see this module's patch.
    monkeypatch.setattr(analyse, "load", dies_in_a_worker)
    monkeypatch.setattr(analyse.processes, "START_METHOD", "fork")
    assert run(capsys, "rank0.json.gz", "rank1.json.gz", "rank2.json.gz", "-j", "3") == expected


# -- monitor's and verify's command lines --------------------------------------


def monitored_run(script: str) -> dict[str, Any]:
    """What a monitored script leaves: one waiting loader at line 3 of
    ``script``, the repository's strings in its notes and GPU name."""
    steps = [[1.0 + i * 0.042, 0.042, 0.040, 0] for i in range(20)]
    return {
        "exit_code": 0, "wall_s": 10.0, "started": 1_765_000_000.0, "cuda": False,
        "loaders": [{
            "index": 0, "file": script, "line": 3, "end_line": 3, "class": "torch.utils.data.dataloader.DataLoader",
            "config": {"num_workers": 0, "persistent_workers": False, "prefetch_factor": None, "pin_memory": False},
            "len": 16, "batch_size": 4, "dataset": MARKER, "batches": 20, "iterators": ["_SingleProcessDataLoaderIter"],
            "pass_starts": [0], "steps": steps, "pinned": {"pinned": 0, "pageable": 0, "batch_bytes": 64},
        }],
        "sampling": {"memory": [], "gpu": {"sampled": True, "name": f"GPU{MARKER}", "count": 1, "reason": None,
                                           "samples": [[1.0, 10.0, None]]}},
        "copies": [], "tuning": None, "notes": [f"::error::{MARKER}"],
    }


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_monitor_report_and_its_lines(capsys, tmp_path, monkeypatch, fmt):
    from loadlint.monitor import command

    monkeypatch.chdir(tmp_path)
    script = f"##[error]{OSC}.py"
    (tmp_path / script).write_text("from torch.utils.data import DataLoader\n\nloader = DataLoader(range(64), batch_size=4)\n")

    def child(spec_path: str, nproc: int | None) -> tuple[int, bool]:
        spec = json.loads(Path(spec_path).read_text())
        Path(spec["out"]).write_text(json.dumps(monitored_run(spec["script"])))
        return 0, False

    monkeypatch.setattr(command, "_run_child", child)
    code = main(["monitor", script, "--output-format", fmt, "-o", f"{script}.json", "--", f"::warning::{BIDI}"])
    out, err = capsys.readouterr()
    assert code == 0 and hijacks(out + err) == [], out + err
    assert err == "loadlint: wrote \\x23#[error]\\x1b]52;c;aGk=\\x07.py.json\n"
    if fmt == "json":
        assert f"GPU{MARKER}" in set(strings(json.loads(out, parse_constant=no_constants)))
    else:
        assert out.startswith("loadlint monitor: python \\x23#[error]\\x1b]52;c;aGk=\\x07.py ::warning::\\u202e\\u2066\\u2028 (exit 0,")
        assert "  note: ::error::" + SHOWN in out.splitlines()


def test_monitor_error_line_escapes_the_script_name(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["monitor", f"##[error]{CSI}.py"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == "loadlint: error: \\x23#[error]\\x1b[2J\\x9b1m.py: no such file\n"


def test_verify_names_the_script_escaped_before_simulating_ranks(capsys, tmp_path, monkeypatch):
    from types import SimpleNamespace

    from loadlint.verify import command

    monkeypatch.chdir(tmp_path)
    script = f"##[error]{OSC}.py"
    (tmp_path / script).write_text("from torch.utils.data import DataLoader\n")
    calls = []

    def shim(spec: dict[str, Any], work: Any, **kw: Any) -> Any:
        # The ranks fail for want of CUDA; the simulated run stops the test.
        calls.append(spec["mode"])
        if len(calls) > 1:
            raise command.VerifyError("stopped here")
        return SimpleNamespace(results=[], log="RuntimeError: no NVIDIA driver", status="done", log_tail=lambda n: "")

    monkeypatch.setattr(command, "run_shim", shim)
    code = main(["verify", script, "--nproc", "2"])
    out, err = capsys.readouterr()
    assert code == 2 and calls == ["ddp", "ddp_sim"] and hijacks(out + err) == [], err
    assert "will execute python \\x23#[error]\\x1b]52;c;aGk=\\x07.py once more without a process group" in err
