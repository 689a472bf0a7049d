"""``loadlint trace`` on hostile input: a repository and traces nobody
vouched for.

The rank pool and ``check``'s pool start nothing from the repository under
any start method; a trace cannot make the reader decompress or hold without
bound, and the work stays linear in steps and events; ``--plot`` ignores the
repository's ``matplotlibrc`` and draws trace strings as plain text; JSON
output is JSON; ``--source`` reads as ``check`` does (pre-filter, guarded
reads, bounded parse, deep nesting skipped); without ``--source`` a stack
frame's file is read only inside the project.  Each case failed on the code
before these guards.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from loadlint.frontends.cli import main
from loadlint.trace import stream
from tests.adversarial.peak import polled

SECRET = "sk-live-7f3a9c"
SINGLE = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
MULTI = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
ITER = "torch/utils/data/dataloader.py(480): __iter__"
LOADER = "from torch.utils.data import DataLoader\n\n\ndef make(ds):\n    return DataLoader(ds, batch_size=8, prefetch_factor=2)\n"


# -- building traces -----------------------------------------------------------


def x(name: str, ts: float, dur: float, cat: str = "user_annotation", pid: int = 100, tid: int = 100, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def step_events(steps: int, *, iterator: str = SINGLE, wait_us: float = 6_000, kernel: bool = True,
                long_every: int = 0, frames: bool = False) -> Iterator[dict[str, Any]]:
    """A loop of ``steps`` 10 ms steps; every ``long_every``-th step starts
    a pass over the loader (an ``__iter__`` frame, a long wait)."""
    for i in range(steps):
        t = 1_000_000.0 + i * 10_000
        long = long_every and i % long_every == 0
        wait = 9_000.0 if long else wait_us
        yield x(f"ProfilerStep#{i}", t, 10_000)
        if frames and long:
            yield x(ITER, t + 5, 2, cat="python_function")
        yield x(iterator, t + 10, wait)
        if kernel:
            yield x("volta_sgemm_128x64_nn", t + wait + 100, 3_000, cat="kernel", pid=0, tid=7)


def trace_of(events: Iterator[dict[str, Any]] | list[dict[str, Any]], **header: Any) -> dict[str, Any]:
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}], **header, "traceEvents": list(events)}


def write(path: Path, trace: Any, *, gz: bool = False) -> Path:
    text = json.dumps(trace)
    path.write_bytes(gzip.compress(text.encode(), 1) if gz else text.encode())
    return path


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["trace", *argv])
    out, err = capsys.readouterr()
    return code, out, err


# -- a subprocess with its peak memory ----------------------------------------


@dataclass
class Ran:
    code: int
    out: str
    err: str
    seconds: float
    peak_mb: int
    cpu: float


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("LOADLINT_", "MPL"))}
    out["NO_COLOR"] = "1"
    out["PYTHONDONTWRITEBYTECODE"] = "1"
    return out


def run(cwd: Path, *args: str, script: Path | None = None, timeout: float = 120) -> Ran:
    """``python -m loadlint ARGS`` (or ``python script ARGS``) in ``cwd``;
    its own peak resident memory (``VmHWM``, polled) and CPU seconds."""
    command = [sys.executable, str(script), *args] if script else [sys.executable, "-m", "loadlint", *args]
    code, out, err, seconds, peak_kb, cpu = polled(command, cwd, env(), timeout)
    ran = Ran(code, out, err, seconds, peak_kb // 1024, cpu)
    assert ran.code >= 0 and ran.seconds < timeout, f"killed after {ran.seconds:.1f} s"
    assert "Traceback" not in ran.err, ran.err[-3000:]
    return ran


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    """(repo, outside): a repository with a .git folder, and beside it a
    file holding a secret."""
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    (repo / ".git").mkdir(parents=True)
    outside.mkdir()
    (outside / "train.py").write_text(
        "from torch.utils.data import DataLoader\n\n\ndef main(ds):\n"
        f"    for b in DataLoader(ds, multiprocessing_context={SECRET!r}):\n        pass\n"
    )
    return repo, outside


# -- 1. every pool: nothing from the repository runs ---------------------------


PLANTED = ("multiprocessing/__init__.py", "sitecustomize.py", "usercustomize.py", "concurrent/__init__.py")


def plant(repo: Path, marker: Path) -> None:
    for name in PLANTED:
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"open({str(marker)!r} + str(__import__('os').getpid()), 'w').write({name!r})\n")


@pytest.mark.slow
@pytest.mark.parametrize("method", ["spawn", "forkserver"])
@pytest.mark.parametrize("command", ["check", "trace"])
def test_pools_start_nothing_from_the_repository(world, tmp_path, command, method):
    repo, _ = world
    marker = tmp_path / "marker"
    plant(repo, marker)
    if command == "check":
        # Large enough that two processes pay for themselves.
        for i in range(4):
            (repo / f"m{i}.py").write_text(LOADER + "# padding\n" * 4000)
        args = ["check", "--no-cache", "-j", "2", "--target", "cpus=4,gpus=1", "--output-format", "concise", "."]
    else:
        for rank in range(2):
            write(repo / f"rank{rank}.json", trace_of(step_events(6), distributedInfo={"rank": rank}))
        args = ["trace", "-j", "2", "--output-format", "json", "rank0.json", "rank1.json"]
    # Outside the repository, so that the parent itself imports nothing from it;
    # every context multiprocessing hands out starts its processes with ``method``.
    driver = tmp_path / "driver.py"
    driver.write_text(
        "import multiprocessing, sys\n"
        "real = multiprocessing.get_context\n"
        f"multiprocessing.get_context = lambda method=None: real({method!r})\n"
        "from loadlint.frontends.cli import main\n"
        "if __name__ == '__main__':\n"
        "    sys.exit(main(sys.argv[1:]))\n"
    )
    ran = run(repo, *args, script=driver)
    assert ran.code == 1, ran.err[-2000:]
    if command == "check":
        assert ran.out.count("LL001") == 4, ran.out
    else:
        assert len(json.loads(ran.out)["ranks"]) == 2
    assert sorted(p.read_text() for p in tmp_path.glob("marker*")) == []


# -- 2. bounded reading --------------------------------------------------------


def test_one_huge_string_is_refused_without_holding_it(world, tmp_path):
    repo, _ = world
    path = repo / "huge.json.gz"
    # 200 MB of text in 200 kB of gzip: the name of one event.
    events = json.dumps(list(step_events(6)))
    with gzip.open(path, "wb", compresslevel=1) as handle:
        handle.write(b'{"schemaVersion": 1, "traceEvents": ' + events[:-1].encode() + b', {"ph": "X", "name": "')
        block = b"a" * (1 << 20)
        for _ in range(200):
            handle.write(block)
        handle.write(b'", "ts": 1, "dur": 1}]}')
    ran = run(repo, "trace", str(path))
    cap = stream.MAX_ELEMENT_CHARS
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == f"loadlint: error: {path}: a JSON value of the trace is longer than {cap:,} characters (the most loadlint reads)\n"
    assert ran.peak_mb < 250, f"peak {ran.peak_mb} MB"


def test_decompressed_text_is_capped(tmp_path, capsys, monkeypatch):
    path = write(tmp_path / "t.json.gz", trace_of(step_events(50)), gz=True)
    size = len(gzip.decompress(path.read_bytes()))
    monkeypatch.setattr(stream, "MAX_TEXT_CHARS", size - 100)
    code, out, err = cli(capsys, str(path))
    assert (code, out) == (2, "")
    assert err == f"loadlint: error: {path}: the trace is longer than {size - 100:,} characters of JSON (the most loadlint reads)\n"


def test_event_count_is_capped(tmp_path, capsys, monkeypatch):
    path = write(tmp_path / "t.json", trace_of(step_events(50)))
    monkeypatch.setattr(stream, "MAX_EVENTS", 120)
    code, out, err = cli(capsys, str(path))
    assert (code, out) == (2, "")
    assert err == f"loadlint: error: {path}: the trace holds more than 120 events (the most loadlint reads); profile fewer steps\n"


def test_kept_events_are_capped_not_the_events_read(tmp_path, capsys, monkeypatch):
    # A profile recorded with stacks reads millions of events and keeps few:
    # the memory cap counts what is kept.
    from loadlint.trace import events

    path = write(tmp_path / "t.json", trace_of(step_events(50)))
    monkeypatch.setattr(events, "KEPT_CHECK_EVERY", 1)
    monkeypatch.setattr(events, "MAX_KEPT_EVENTS", 120)
    code, out, err = cli(capsys, str(path))
    assert (code, out) == (2, "")
    assert err == (f"loadlint: error: {path}: the trace holds more than 120 events loadlint keeps "
                   "(GPU work, copies, runtime calls, frames, steps); profile fewer steps\n")
    monkeypatch.setattr(events, "MAX_KEPT_EVENTS", 100_000)
    assert cli(capsys, str(path))[0] in (0, 1)


def test_deeply_nested_header_value_is_one_line(tmp_path, capsys):
    path = tmp_path / "t.json"
    path.write_text('{"distributedInfo": ' + "[" * 100_000 + "]" * 100_000 + ', "traceEvents": ' + json.dumps(list(step_events(4))) + "}")
    code, out, err = cli(capsys, str(path))
    assert (code, out) == (2, "")
    assert err == f"loadlint: error: {path}: a JSON value of the trace is nested too deeply\n"


@pytest.mark.slow
def test_many_pass_starts_stay_linear(world):
    repo, _ = world
    # A pass starts every third step: a third of 60k steps are pass starts.
    path = write(repo / "t.json.gz", trace_of(step_events(60_000, iterator=MULTI, wait_us=100, kernel=False, long_every=3,
                                                         frames=True)), gz=True)
    ran = run(repo, "trace", "--output-format", "json", str(path))
    assert ran.code == 1, ran.err
    assert "LL204" in {f["code"] for f in json.loads(ran.out)["findings"]}
    # Quadratic, this took over a minute.
    assert ran.cpu < 8, f"{ran.cpu:.1f} s CPU"


@pytest.mark.slow
def test_plot_of_many_steps_is_cheap(world):
    pytest.importorskip("matplotlib")
    repo, _ = world
    path = write(repo / "t.json.gz", trace_of(step_events(50_000)), gz=True)
    ran = run(repo, "trace", "--plot", "p.png", "--output-format", "json", str(path))
    assert ran.code == 1, ran.err
    assert (repo / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # One line per step took 30 s and 700 MB.
    assert ran.peak_mb < 400, f"peak {ran.peak_mb} MB"
    assert ran.cpu < 25, f"{ran.cpu:.1f} s CPU"


# -- 3. --plot: no repository settings, plain text -----------------------------


def test_plot_ignores_the_repositorys_matplotlibrc(world):
    pytest.importorskip("matplotlib")
    repo, outside = world
    (outside / "preamble.tex").write_text("\\immediate\\write18{touch pwned}\n")
    (repo / "matplotlibrc").write_text(
        "text.usetex: True\n"
        f"text.latex.preamble: \\input{{{outside / 'preamble.tex'}}}\n"
        "savefig.directory: /\n"
    )
    write(repo / "t.json", trace_of(step_events(6)))
    ran = run(repo, "trace", "--plot", "p.png", "t.json")
    assert ran.code == 1, ran.err
    assert (repo / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(repo.rglob("*.tex")) and not (repo / "pwned").exists()


def test_plot_draws_trace_strings_as_plain_text(world):
    pytest.importorskip("matplotlib")
    repo, _ = world
    name = "$" + "\\sqrt{" * 300 + "x" + "}" * 300 + "$ $\\frac{1}{$"
    write(repo / "$\\alpha$.json", trace_of(step_events(6), deviceProperties=[{"id": 0, "name": name}]))
    ran = run(repo, "trace", "--plot", "p.png", "$\\alpha$.json")
    assert ran.code == 1, ran.err
    assert (repo / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- 4. JSON is JSON ------------------------------------------------------------


def _strict(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("dur", ["Infinity", "NaN", "1e308"])
def test_json_output_has_no_nan_or_infinity(tmp_path, capsys, dur):
    events = json.dumps(list(step_events(6)))
    odd = f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#99", "ts": 1e308, "dur": {dur}}}'
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": ' + events[:-1] + ", " + odd + "]}")
    code, out, err = cli(capsys, str(path), "--output-format", "json")
    assert code == 1, err
    report = _strict(out)
    assert report["summary"]["steps"] in (6, 7)
    code, out, _ = cli(capsys, "--compare", str(path), str(path), "--output-format", "json")
    assert _strict(out)["before"]["summary"]["steps"] == report["summary"]["steps"]


# -- 5. --source reads as check does --------------------------------------------


TRAIN = """\
from torch.utils.data import DataLoader

def main(ds):
    loader = DataLoader(ds, batch_size=32)
    for b in loader:
        pass

if __name__ == "__main__":
    main(None)
"""


def test_source_skips_a_deeply_nested_file(world, capsys):
    repo, _ = world
    (repo / "train.py").write_text(TRAIN)
    (repo / "deep.py").write_text("from torch.utils.data import DataLoader\nx = a" + ".b" * 100_000 + "\nDataLoader(x)\n")
    path = write(repo / "t.json", trace_of(step_events(6)))
    code, out, err = cli(capsys, str(path), "--source", str(repo), "--output-format", "json")
    assert code == 1, err
    assert {f["location"]["path"].rpartition("/")[2] for f in json.loads(out)["findings"]} == {"train.py"}


@pytest.mark.slow
def test_source_bounds_a_huge_table(world):
    repo, _ = world
    (repo / "train.py").write_text("TABLE = [" + "1," * 1_500_000 + "]\n" + TRAIN)
    write(repo / "t.json", trace_of(step_events(6)))
    ran = run(repo, "trace", "t.json", "--source", ".", "--output-format", "json")
    assert ran.code == 1, ran.err
    assert {f["location"]["row"] for f in json.loads(ran.out)["findings"]} == {5}
    # ast-parsing the whole file took 1.4 GB.
    assert ran.peak_mb < 400, f"peak {ran.peak_mb} MB"


def test_source_reads_no_fifo_and_no_file_without_a_loader(world, capsys):
    repo, _ = world
    (repo / "train.py").write_text(TRAIN)
    os.mkfifo(repo / "pipe.py")
    # No DataLoader( in it: the pre-filter skips it unparsed.
    (repo / "broken.py").write_text("x = (" * 50 + "\n")
    path = write(repo / "t.json", trace_of(step_events(6)))
    code, out, err = cli(capsys, str(path), "--source", str(repo), "--output-format", "json")
    assert code == 1, err
    assert {f["location"]["path"].rpartition("/")[2] for f in json.loads(out)["findings"]} == {"train.py"}


# -- 6. without --source: the stack's file, inside the project only ----------------


def test_stack_file_linked_out_of_the_project_is_not_read(world):
    repo, outside = world
    (repo / "train.py").symlink_to(outside / "train.py")
    events = list(step_events(6))
    for i in range(6):
        t = 1_000_000.0 + i * 10_000
        events.append(x("train.py(4): main", t, 9_000, cat="python_function"))
        events.append(x("torch/utils/data/dataloader.py(700): __next__", t + 10, 6_000, cat="python_function"))
    write(repo / "t.json", trace_of(events))
    for fmt in ("text", "json"):
        ran = run(repo, "trace", "t.json", "--output-format", fmt)
        assert ran.code == 1, ran.err
        assert SECRET not in ran.out + ran.err
        assert "train.py:" not in ran.out


def test_source_leaves_long_data_lines_out_and_keeps_rows(tmp_path):
    from loadlint.trace.source import loader_calls

    table = "[" + "1, " * 100_000 + "]"
    (tmp_path / "train.py").write_text(
        "from torch.utils.data import DataLoader\n"
        "BIG = (\n    " + table + "\n)\n"
        "def main(ds):\n"
        "    weights = " + table + "\n"
        "            # " + "x" * 20_000 + "\n"
        "    loader = DataLoader(ds, num_workers=2)\n"
        "    for b in loader:\n"
        "        pass\n"
    )
    calls = loader_calls(tmp_path)
    assert [(c.row, c.function, c.workers, c.iterated_in) for c in calls] == [(8, ("main", 5, 10), 2, (("main", 5, 10),))]


@pytest.mark.parametrize("body, reason", [
    ('"steps": ' + "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('"steps": [], "pad": "' + "a" * (64 << 20) + '"', "file too large"),
])
def test_monitor_report_is_read_within_bounds(tmp_path, capsys, body, reason):
    path = tmp_path / "monitor.json"
    path.write_text('{"schema": "loadlint.monitor/1", ' + body + "}")
    code, out, err = cli(capsys, str(path))
    assert (code, out) == (2, "")
    assert err.startswith(f"loadlint: error: {path}: unreadable monitor report (") and reason in err
    assert err.count("\n") == 1


def test_many_large_header_values_are_bounded_together(tmp_path, capsys):
    path = tmp_path / "t.json.gz"
    events = json.dumps(list(step_events(6)))
    with gzip.open(path, "wb", compresslevel=1) as handle:
        handle.write(b"{")
        for i in range(4):
            handle.write(b'"k%d": "' % i + b"a" * (10 << 20) + b'", ')
        handle.write(b'"traceEvents": ' + events.encode() + b"}")
    code, out, err = cli(capsys, str(path))
    assert (code, out) == (2, "")
    cap = stream.MAX_ELEMENT_CHARS
    assert err == f"loadlint: error: {path}: the trace's top-level values besides traceEvents are longer than {cap:,} characters (the most loadlint reads)\n"


@pytest.mark.slow
def test_long_names_are_not_kept(world):
    repo, _ = world
    path = repo / "t.json.gz"
    events = json.dumps(list(step_events(6)))
    name = b"a" * (8 << 20)
    with gzip.open(path, "wb", compresslevel=1) as handle:
        handle.write(b'{"traceEvents": ' + events[:-1].encode())
        for i in range(60):
            handle.write(b', {"ph": "X", "cat": "python_function", "name": "train.py(%d): ' % i + name + b'", "ts": 1000000, "dur": 5}')
            handle.write(b', {"ph": "X", "name": "enumerate(DataLoader)#' + name + b'.__next__", "ts": 1000000, "dur": 5}')
        handle.write(b"]}")
    ran = run(repo, "trace", "--output-format", "json", str(path))
    assert ran.code == 1, ran.err
    assert json.loads(ran.out)["summary"]["steps"] == 6
    # Kept, the names took a gigabyte.
    assert ran.peak_mb < 250, f"peak {ran.peak_mb} MB"


def test_distinct_names_are_bounded_together(tmp_path, capsys, monkeypatch):
    from loadlint.trace import events

    frames = [x(f"train.py({i}): step_{i:04d}", 1_000_000.0 + i, 1, cat="python_function") for i in range(500)]
    # The same frame every step is held once.
    repeated = [x("train.py(4): main", 1_000_000.0 + i, 1, cat="python_function") for i in range(5000)]
    path = write(tmp_path / "t.json", trace_of([*step_events(6), *repeated]))
    monkeypatch.setattr(events, "MAX_NAME_CHARS", 5000)
    assert cli(capsys, str(path))[0] == 1
    path = write(tmp_path / "t.json", trace_of([*step_events(6), *frames]))
    code, out, err = cli(capsys, str(path))
    assert (code, out) == (2, "")
    assert err == f"loadlint: error: {path}: the trace's frame and iterator names are longer than 5,000 characters together (the most loadlint keeps)\n"
