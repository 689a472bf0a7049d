"""``loadlint trace`` on small hand-written traces shaped like Kineto's GPU
traces: the JSON contract, the findings and their evidence, mapping back to
the source, ``--fix``, ``--compare``, ``--plot`` and every bad input."""

from __future__ import annotations

import gzip
import os
import json
from pathlib import Path
from typing import Any

import pytest

from loadlint.frontends.cli import main
from loadlint.trace import stream
from loadlint.trace.source import loader_calls

SINGLE = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
MULTI = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"


def x(name: str, ts: float, dur: float, cat: str = "user_annotation", pid: int = 100, tid: int = 100, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def gpu_trace(*, steps: int = 6, step_us: float = 10_000, wait_us: float = 6_000, iterator: str = SINGLE,
              pinned: bool = False, sync: str | None = "cudaStreamSynchronize", kernel_us: float = 3_000,
              rank: int | None = None, copy_bytes: int = 8 << 20) -> dict[str, Any]:
    """A training loop: each step waits for the loader, copies the batch to
    the GPU (pageable or pinned, optionally followed by a synchronisation)
    and runs one kernel."""
    events: list[dict[str, Any]] = []
    base = 1_000_000.0
    for i in range(steps):
        t = base + i * step_us
        events.append(x(f"ProfilerStep#{i + 10}", t, step_us))
        events.append(x(iterator, t + 10, wait_us))
        copy_at = t + wait_us + 50
        kind = "Pinned" if pinned else "Pageable"
        events.append(x("cudaMemcpyAsync", copy_at, 30, cat="cuda_runtime", correlation=i * 10 + 1))
        events.append(x(f"Memcpy HtoD ({kind} -> Device)", copy_at + 20, 400, cat="gpu_memcpy", pid=0, tid=7,
                        correlation=i * 10 + 1, bytes=copy_bytes, device=0))
        if sync:
            events.append(x(sync, copy_at + 40, 380, cat="cuda_runtime", correlation=i * 10 + 2))
        events.append(x("cudaLaunchKernel", copy_at + 450, 5, cat="cuda_runtime", correlation=i * 10 + 3))
        events.append(x("volta_sgemm_128x64_nn", copy_at + 460, kernel_us, cat="kernel", pid=0, tid=7, correlation=i * 10 + 3))
        # Recent PyTorch repeats each step on the device's timeline: not a step of its own.
        events.append(x(f"ProfilerStep#{i + 10}", copy_at + 460, kernel_us, cat="gpu_user_annotation", pid=0, tid=7))
    trace: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}], "traceEvents": events}
    if rank is not None:
        trace["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    return trace


def write(path: Path, trace: Any, *, gz: bool = False) -> Path:
    text = json.dumps(trace)
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["trace", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_contract_single_trace(tmp_path, capsys):
    path = write(tmp_path / "rank0.json", gpu_trace())
    code, out, err = run(capsys, str(path), "--output-format", "json")
    assert code == 1, err
    data = json.loads(out)
    assert list(data) == ["summary", "steps", "findings"]
    assert data["summary"] == {
        "steps": 6, "median_step_ms": 10.0, "data_wait_share": 0.6, "gpu_busy_share": 0.34,
        "h2d": {"pageable_bytes": 6 * (8 << 20), "pinned_bytes": 0, "pageable_gbps": 20.972, "pinned_gbps": None},
        "device": "NVIDIA H200",
    }
    assert data["steps"][0] == {"index": 0, "dur_ms": 10.0, "data_wait_ms": 6.0, "gpu_busy_ms": 3.4}
    assert [f["code"] for f in data["findings"]] == ["LL201", "LL202", "LL205", "LL302"]
    for finding in data["findings"]:
        assert list(finding) == ["code", "message", "evidence", "location"]
        assert finding["location"] is None
    ll201 = data["findings"][0]
    assert ll201["evidence"]["median_step_without_wait_ms"] == 4.0
    assert ll201["evidence"]["speedup"] == 2.5
    ll205 = data["findings"][2]["evidence"]
    # The host waits through the copy call and the synchronisation after it.
    assert ll205["blocking_copies"] == 6 and ll205["calls"] == ["cudaMemcpyAsync + cudaStreamSynchronize"]
    assert ll205["blocked_ms_per_step"] == 0.41


def test_pinned_non_blocking_with_workers_is_clean(tmp_path, capsys):
    path = write(tmp_path / "fast.json.gz", gpu_trace(wait_us=50, iterator=MULTI, pinned=True, sync=None, kernel_us=9_000), gz=True)
    code, out, err = run(capsys, str(path))
    assert code == 0, out + err
    assert out.endswith("No loader bottleneck found in the trace.\n")
    assert "(NVIDIA H200, 6 steps, _MultiProcessingDataLoaderIter)" in out
    assert "host-to-device: pageable 0 B, pinned 50,331,648 B at 21.0 GB/s" in out


def test_synchronous_cudamemcpy_is_a_blocking_copy(tmp_path, capsys):
    trace = gpu_trace(wait_us=50, iterator=MULTI, pinned=True, sync=None)
    for e in trace["traceEvents"]:
        if e["name"] == "cudaMemcpyAsync":
            e["name"], e["dur"] = "cudaMemcpy", 420
    code, out, _ = run(capsys, str(write(tmp_path / "t.json", trace)), "--output-format", "json")
    assert [f["code"] for f in json.loads(out)["findings"]] == ["LL205"]
    assert code == 1


def test_a_sync_not_after_a_copy_is_not_blocking(tmp_path, capsys):
    trace = gpu_trace(wait_us=50, iterator=MULTI, pinned=True, sync=None)
    # A synchronisation after a kernel launch (e.g. for timing) is not a copy's.
    trace["traceEvents"] += [x("cudaDeviceSynchronize", 1_000_000 + i * 10_000 + 9_000, 500, cat="cuda_runtime") for i in range(6)]
    code, out, _ = run(capsys, str(write(tmp_path / "t.json", trace)), "--output-format", "json")
    assert json.loads(out)["findings"] == [] and code == 0


def test_text_output_table_then_findings(tmp_path, capsys):
    path = write(tmp_path / "slow.json", gpu_trace())
    code, out, _ = run(capsys, str(path))
    lines = out.splitlines()
    assert lines[0] == f"{path} (NVIDIA H200, 6 steps, _SingleProcessDataLoaderIter)"
    assert lines[1].split() == ["step", "time", "ms", "data", "wait", "ms", "GPU", "busy", "ms"]
    assert lines[2].split() == ["0", "10.00", "6.00", "(60%)", "3.40", "(34%)"]
    assert f"{path}: LL201 DataLoader loads in the training process (num_workers=0): the typical step waits for data: " \
           "median step 10.0 ms, 4.0 ms without the wait (60% of it); over the trace data wait is 60% of the step time" in lines
    assert lines[-1] == "Found 4 findings in the trace."


def test_steps_inferred_without_profiler_steps(tmp_path, capsys):
    events = [x(SINGLE, 1000.0 + i * 5000, 4000) for i in range(5)]
    code, out, err = run(capsys, str(write(tmp_path / "legacy.json", {"traceEvents": events})), "--output-format", "json")
    data = json.loads(out)
    assert data["summary"]["steps"] == 4 and data["summary"]["data_wait_share"] == 0.8
    assert data["summary"]["gpu_busy_share"] is None and data["steps"][0]["gpu_busy_ms"] is None
    assert err == f"loadlint: note: {tmp_path / 'legacy.json'}: no GPU events: GPU busy is not measured\n"
    code, out, _ = run(capsys, str(tmp_path / "legacy.json"))
    assert "steps inferred from DataLoader __next__ spans (no ProfilerStep)" in out.splitlines()[0]


def restarts_trace(long_steps: tuple[int, ...]) -> dict[str, Any]:
    trace = gpu_trace(steps=18, step_us=60_000, wait_us=100, iterator=MULTI, pinned=True, sync=None, kernel_us=9_000)
    for e in trace["traceEvents"]:
        if e["name"] == MULTI and (e["ts"] - 1_000_010.0) / 60_000 in long_steps:
            e["dur"] = 50_000  # a pass starts, its workers boot
    return trace


def test_worker_restarts_at_pass_starts(tmp_path, capsys):
    code, out, _ = run(capsys, str(write(tmp_path / "t.json", restarts_trace((0, 6, 12)))), "--output-format", "json")
    (ll204,) = [f for f in json.loads(out)["findings"] if f["code"] == "LL204"]
    assert ll204["evidence"] == {"epoch_start_steps": [0, 6, 12], "epoch_start_wait_ms": [50.0, 50.0, 50.0],
                                 "median_wait_ms": 0.1, "lost_ms": 149.7}
    assert code == 1


@pytest.mark.parametrize("long_steps", [(0,), (0, 6), (0, 6, 9), (3, 4, 5)])
def test_long_waits_without_a_period_are_not_restarts(tmp_path, capsys, long_steps):
    # Without Python frames only a steady period shows passes: one long
    # first step (the profiler may start with a pass) or hiccups prove nothing.
    code, out, _ = run(capsys, str(write(tmp_path / "t.json", restarts_trace(long_steps))))
    assert "LL204" not in out and "long first steps" not in out


def test_a_few_long_waits_do_not_make_the_run_loading_bound(tmp_path, capsys):
    # Two hiccups hold most of a short trace's wait; the typical step does not wait.
    trace = gpu_trace(steps=8, wait_us=100, iterator=MULTI, pinned=True, sync=None, kernel_us=9_000)
    for e in trace["traceEvents"]:
        if e["name"] == MULTI and e["ts"] in (1_020_010.0, 1_030_010.0):
            e["dur"] = 9_000
    code, out, _ = run(capsys, str(write(tmp_path / "t.json", trace)), "--output-format", "json")
    data = json.loads(out)
    assert data["summary"]["data_wait_share"] == 0.233
    assert data["findings"] == [] and code == 0


def test_ranks_folder_and_lagging_rank(tmp_path, capsys):
    folder = tmp_path / "ranks"
    folder.mkdir()
    write(folder / "rank0.json", gpu_trace(wait_us=100, iterator=MULTI, pinned=True, sync=None, rank=0))
    write(folder / "rank1.json", gpu_trace(wait_us=100, iterator=MULTI, pinned=True, sync=None, rank=1))
    write(folder / "rank2.json.gz", gpu_trace(wait_us=8_000, iterator=MULTI, pinned=True, sync=None, rank=2), gz=True)
    code, out, _ = run(capsys, str(folder), "--output-format", "json", "-j", "2")
    data = json.loads(out)
    assert list(data) == ["ranks", "summary"] and code == 1
    assert [r["summary"]["steps"] for r in data["ranks"]] == [6, 6, 6]
    assert data["summary"]["steps"] == 18
    assert [[f["code"] for f in r["findings"]] for r in data["ranks"]] == [[], [], ["LL301", "LL302", "LL303"]]
    ll303 = data["ranks"][2]["findings"][2]
    assert ll303["evidence"] == {"median_wait_ms": 8.0, "median_wait_other_ranks_ms": 0.1, "lost_ms_per_step": 7.9}


def test_files_without_distinct_ranks_are_not_compared(tmp_path, capsys):
    folder = tmp_path / "cycles"
    folder.mkdir()
    write(folder / "a.json", gpu_trace(wait_us=100, iterator=MULTI, pinned=True, sync=None))
    write(folder / "b.json", gpu_trace(wait_us=8_000, iterator=MULTI, pinned=True, sync=None))
    code, out, _ = run(capsys, str(folder), "--output-format", "json", "-j", "1")
    assert "LL303" not in out and len(json.loads(out)["ranks"]) == 2


def test_compare(tmp_path, capsys):
    before = write(tmp_path / "before.json", gpu_trace())
    after = write(tmp_path / "after.json", gpu_trace(step_us=5_000, wait_us=50, iterator=MULTI, pinned=True, sync=None))
    code, out, _ = run(capsys, "--compare", str(before), str(after), "--output-format", "json")
    data = json.loads(out)
    assert list(data) == ["before", "after", "step_time_ratio"]
    assert data["step_time_ratio"] == 2.0 and code == 0
    code, out, _ = run(capsys, "--compare", str(before), str(after))
    assert out.splitlines()[2].split() == ["median", "step", "ms", "10.000", "5.000"]
    assert out.splitlines()[-1] == "median step time ratio (before/after): 2.00x"


def test_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "out" / "timeline.png"
    code, _, err = run(capsys, str(write(tmp_path / "t.json", gpu_trace())), "--plot", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"loadlint: wrote {png}" in err


PROJECT = {
    "train.py": """\
from torch.utils.data import DataLoader
from data import make_dataset

def main():
    loader = DataLoader(make_dataset(), batch_size=32, shuffle=True)
    for x, y in loader:
        step(x.cuda(), y.cuda())

if __name__ == "__main__":
    main()
""",
    "evaluate.py": """\
from torch.utils.data import DataLoader

def evaluate(ds):
    return DataLoader(ds, batch_size=64, num_workers=4)
""",
}


def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    for name, text in PROJECT.items():
        (root / name).write_text(text)
    return root


def test_source_maps_the_loader_and_attaches_static_findings(tmp_path, capsys):
    root = project(tmp_path)
    path = write(tmp_path / "t.json", gpu_trace())
    code, out, _ = run(capsys, str(path), "--source", str(root), "--output-format", "json")
    findings = json.loads(out)["findings"]
    assert {json.dumps(f["location"]) for f in findings} == {json.dumps({"path": str(root / "train.py"), "row": 5, "column": 14})}
    assert findings[0]["evidence"]["location_confidence"] == "medium"
    code, out, _ = run(capsys, str(path), "--source", str(root))
    assert f"{root / 'train.py'}:5:14: LL201 DataLoader loads in the training process" in out
    assert "  = DataLoader call: medium confidence (the only DataLoader (without workers, not pinned) that the entry script iterates)" in out
    assert any(line.startswith(f"  = static: {root / 'train.py'}:5:") and " LL201 " in line for line in out.splitlines())


def test_source_fix_applies_the_static_fixes(tmp_path, capsys):
    root = project(tmp_path)
    code, out, err = run(capsys, str(write(tmp_path / "t.json", gpu_trace())), "--source", str(root), "--fix")
    after = (root / "train.py").read_text()
    assert "num_workers=" in after and "num_workers=" in out
    assert f"+++ {root / 'train.py'}" in out or "+++ " in out
    assert (root / "evaluate.py").read_text() == PROJECT["evaluate.py"]
    assert "Fixed 2 problems in the mapped DataLoader call's file." in err


FIT = """\
from torch.utils.data import DataLoader

def fit(model, loader):
    for x, y in loader:
        model(x)

def main():
    train = DataLoader(make(), batch_size=8)
    val = DataLoader(make(), batch_size=8, num_workers=0)
    fit(model, loader=train)
    evaluate(val)

if __name__ == "__main__":
    main()
"""


def test_stack_frames_follow_the_loader_into_the_function_that_iterates_it(tmp_path, capsys):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "fit.py").write_text(FIT)
    trace = gpu_trace()
    # with_stack: the frames around each __next__ (the caller started before profiling: line 4, its loop)
    for e in [e for e in trace["traceEvents"] if e["name"] == SINGLE]:
        trace["traceEvents"].append(x("fit.py(4): fit", e["ts"] - 5, e["dur"] + 10, cat="python_function"))
        trace["traceEvents"].append(x("torch/utils/data/dataloader.py(736): __next__", e["ts"], e["dur"], cat="python_function"))
    code, out, _ = run(capsys, str(write(tmp_path / "t.json", trace)), "--source", str(root), "--output-format", "json")
    (ll201,) = [f for f in json.loads(out)["findings"] if f["code"] == "LL201"]
    assert ll201["location"] == {"path": str(root / "fit.py"), "row": 8, "column": 13}
    assert ll201["evidence"]["location_confidence"] == "high"


def test_fix_for_the_target_the_run_trained_on(tmp_path, capsys):
    root = project(tmp_path)
    code, out, _ = run(capsys, str(write(tmp_path / "t.json", gpu_trace())), "--source", str(root), "--fix", "--target", "cpus=16,gpus=1")
    assert "+    loader = DataLoader(make_dataset(), batch_size=32, shuffle=True, num_workers=15, pin_memory=True)" in out.splitlines()
    # The static findings are listed once, under the first finding at the call.
    assert sum(line.startswith("  = DataLoader call:") for line in out.splitlines()) == 1


def test_fix_leaves_a_guess_alone(tmp_path, capsys):
    root = project(tmp_path)
    (root / "other.py").write_text(PROJECT["train.py"].replace("main", "other"))
    code, out, err = run(capsys, str(write(tmp_path / "t.json", gpu_trace())), "--source", str(root), "--fix")
    assert (root / "train.py").read_text() == PROJECT["train.py"]
    assert "low confidence (first of 2 DataLoader calls (without workers, not pinned) that could be it)" in out
    assert f"loadlint: warning: not fixing {root / 'other.py'}:5: the match is a guess" in err


def test_pinned_or_pageable_copies_tell_two_loaders_apart(tmp_path, capsys):
    root = project(tmp_path)
    (root / "other.py").write_text(PROJECT["train.py"].replace("shuffle=True)", "shuffle=True, pin_memory=True)"))
    code, out, _ = run(capsys, str(write(tmp_path / "t.json", gpu_trace(pinned=True))), "--source", str(root))
    assert f"{root / 'other.py'}:5:14: LL201 " in out
    assert "medium confidence (the only DataLoader (without workers, pinned) that the entry script iterates)" in out


def test_fix_with_json_keeps_stdout_json(tmp_path, capsys):
    root = project(tmp_path)
    code, out, err = run(capsys, str(write(tmp_path / "t.json", gpu_trace())), "--source", str(root), "--fix", "--output-format", "json")
    assert [f["code"] for f in json.loads(out)["findings"]][0] == "LL201"
    assert "+    loader = DataLoader(make_dataset(), batch_size=32, shuffle=True, num_workers=" in err


def test_a_folder_without_traces(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("x")
    code, _, err = run(capsys, str(tmp_path))
    assert (code, err) == (2, f"loadlint: error: {tmp_path}: no trace files (*.json, *.json.gz) in the folder\n")


def test_fix_needs_source(tmp_path, capsys):
    code, _, err = run(capsys, str(write(tmp_path / "t.json", gpu_trace())), "--fix")
    assert code == 2 and err == "loadlint: error: --fix needs --source DIR (the training project to fix)\n"


def _bad(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


GOOD = json.dumps(gpu_trace()).encode()
BAD_INPUTS = {
    "truncated": ("t.json", GOOD[: len(GOOD) // 2], "truncated JSON (the file ends inside the trace)"),
    "truncated in a string": ("t.json", GOOD[: GOOD.index(b"Memcpy HtoD") + 6], "truncated JSON (the file ends inside the trace)"),
    "truncated between events": ("t.json", GOOD[: GOOD.index(b"}, {") + 3], "truncated JSON (the file ends inside the trace)"),
    "truncated gzip": ("t.json.gz", gzip.compress(GOOD)[:-200], "cannot read the trace (the gzip stream is truncated)"),
    "malformed": ("t.json", GOOD.replace(b'"ph": "X"', b'"ph" "X"', 1), "malformed JSON at character"),
    "empty file": ("t.json", b"", "the file is empty"),
    "empty object": ("t.json", b"{}", "the trace is an empty JSON object (no traceEvents)"),
    "no events": ("t.json", b'{"schemaVersion": 1, "traceEvents": []}', "the trace has no events"),
    "not a trace": ("t.json", b'{"nodes": []}', "not a profiler trace (no traceEvents)"),
    "not utf-8": ("t.json", b'{"traceEvents": ["\xff"]}', "cannot read the trace (not UTF-8 text)"),
    "no loader": ("t.json", json.dumps({"traceEvents": [x("ProfilerStep#1", 0, 10)]}).encode(), "no DataLoader spans"),
    "unknown schema": ("t.json", json.dumps({**gpu_trace(), "schemaVersion": 7}).encode(), "unknown trace schema version 7"),
    "rocm": ("t.json", json.dumps({"traceEvents": [x(SINGLE, 0, 5), x("hipLaunchKernel", 1, 1, cat="cuda_runtime")]}).encode(),
             "a ROCm (HIP) trace"),
    "one span": ("t.json", json.dumps({"traceEvents": [x(SINGLE, 0, 5)]}).encode(), "no complete step"),
    "mtia": ("t.json", json.dumps({"traceEvents": [x(SINGLE, 0, 5), x("op", 1, 1, cat="mtia_ccp_events")]}).encode(), "an MTIA trace"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, case):
    name, content, message = BAD_INPUTS[case]
    path = _bad(tmp_path, name, content)
    code, out, err = run(capsys, str(path))
    assert code == 2 and out == ""
    assert err.startswith(f"loadlint: error: {path}: ") and err.count("\n") == 1, err
    assert message in err


def test_odd_events_are_skipped_not_fatal(tmp_path, capsys):
    trace = gpu_trace()
    trace["traceEvents"] += [
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "ts": 1, "dur": 1, "args": ["x"]},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpy", "ts": 2, "dur": 1, "args": {"correlation": "7"}},
        {"ph": "X", "name": 5, "ts": 3}, {"ph": "X", "name": "a", "ts": "soon"}, {"ph": "X", "name": "b", "ts": 4, "dur": None},
        "not an object", 17, None,
    ]
    code, out, err = run(capsys, str(write(tmp_path / "t.json", trace)), "--output-format", "json")
    assert code == 1 and json.loads(out)["summary"]["steps"] == 6, err


def test_missing_path(tmp_path, capsys):
    code, _, err = run(capsys, str(tmp_path / "nope.json"))
    assert (code, err) == (2, f"loadlint: error: {tmp_path / 'nope.json'}: no such file or folder\n")


def test_stream_matches_json_load_across_chunk_boundaries(tmp_path, monkeypatch):
    monkeypatch.setattr(stream, "_CHUNK", 97)
    monkeypatch.setattr(stream, "_AHEAD", 13)
    trace = gpu_trace(steps=3)
    trace["traceEvents"].append(x("long " * 200, 1.5e15, 123456789.125))
    trace["after"] = {"key": [1, 2.5, "x"]}
    seen: list[dict[str, Any]] = []
    header = stream.read_events(write(tmp_path / "t.json", trace), seen.append)
    assert seen == trace["traceEvents"]
    assert header["after"] == {"key": [1, 2.5, "x"]} and header["schemaVersion"] == 1


def test_stream_reads_a_bare_event_array(tmp_path):
    seen: list[dict[str, Any]] = []
    stream.read_events(write(tmp_path / "t.json", [x(SINGLE, 0, 5), x(SINGLE, 10, 5)]), seen.append)
    assert [e["ts"] for e in seen] == [0, 10]


def test_rule_command_explains_runtime_codes(capsys):
    assert main(["rule", "LL302"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# gpu-idle-sawtooth (LL302)\n") and "## Fix safety" in out


def test_fifo_is_refused_not_read(tmp_path, capsys):
    fifo = tmp_path / "rank0.json"
    os.mkfifo(fifo)
    code, _, err = run(capsys, str(fifo))
    assert (code, err) == (2, f"loadlint: error: {fifo}: not a regular file\n")


def test_source_reads_nothing_a_link_leads_to(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("from torch.utils.data import DataLoader\nDataLoader(ds)\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("from torch.utils.data import DataLoader\nfor b in DataLoader(ds, num_workers=2):\n    pass\n")
    (project / "linked.py").symlink_to(outside / "secret.py")
    (project / "pkg").symlink_to(outside, target_is_directory=True)
    assert [(c.path.name, c.row) for c in loader_calls(project)] == [("train.py", 2)]


@pytest.mark.parametrize("call, workers, pinned", [
    ("DataLoader(ds, 32, True, None, None, 4)", 4, False),
    ("DataLoader(ds, 32, True, None, None, 0, None, True)", 0, True),
    ("DataLoader(ds, 32, True, None, None, 2, collate)", 2, False),
    ("DataLoader(ds, 32, True, None, None, n)", None, False),
    ("DataLoader(ds, 32, True, None, None, 4, None, flag)", 4, None),
])
def test_positional_arguments_are_read_in_torchs_order(tmp_path, call, workers, pinned):
    path = tmp_path / "train.py"
    path.write_text(f"from torch.utils.data import DataLoader\nloader = {call}\n")
    assert [(c.workers, c.pinned) for c in loader_calls(path)] == [(workers, pinned)]


def test_rank_processes_default_to_the_usable_cpus(tmp_path, monkeypatch):
    from concurrent.futures import ProcessPoolExecutor

    from loadlint.hardware import cpus
    from loadlint.trace.analyse import diagnose_paths

    files = [write(tmp_path / f"rank{r}.json", gpu_trace(rank=r)) for r in range(2)]
    # Four CPUs by affinity, but a quota leaves one: no pool.
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(cpus, "usable_here", lambda: 1)

    def refuse(self, *args, **kwargs):
        raise AssertionError("a pool was started")

    monkeypatch.setattr(ProcessPoolExecutor, "__init__", refuse)
    assert [d.rank.rank for d in diagnose_paths(files)] == [0, 1]


@pytest.mark.parametrize("body, workers, pinned", [
    # A module constant, a ``**dict`` of keywords: resolved as the rules resolve them.
    ("WORKERS = 4\nloader = DataLoader(ds, num_workers=WORKERS)\n", 4, False),
    ('def make(ds):\n    kw = {"pin_memory": True, "num_workers": 2}\n    return DataLoader(ds, **kw)\n', 2, True),
    # A command-line option's default: the run may have been given another.
    ("import argparse\np = argparse.ArgumentParser()\np.add_argument('--workers', type=int, default=0)\n"
     "args = p.parse_args()\nloader = DataLoader(ds, num_workers=args.workers)\n", None, False),
    ("loader = DataLoader(ds, **options())\n", None, None),
])
def test_arguments_are_read_as_check_reads_them(tmp_path, body, workers, pinned):
    path = tmp_path / "train.py"
    path.write_text("from torch.utils.data import DataLoader\n" + body)
    assert [(c.workers, c.pinned) for c in loader_calls(path)] == [(workers, pinned)]


NESTED = """\
from torch.utils.data import DataLoader as Loader

def main(ds):
    train = Loader(ds, batch_size=8)
    extra = Loader(ds, batch_size=8)

    def run(loader):
        for batch in loader:
            pass

    run(train)
    for i, batch in enumerate(Loader(ds)):
        pass

class DataLoader:
    pass

mine = DataLoader()
"""


def test_loaders_are_followed_as_check_follows_them(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(NESTED)
    main, run = ("main", 3, 13), ("run", 7, 9)
    # An import alias, a nested helper given the loader, a loader iterated as built;
    # a class of the module's own named DataLoader is not torch's.
    assert [(c.row, c.column, c.function, c.iterated_in, c.entry) for c in loader_calls(path)] == [
        (4, 13, main, (run,), False), (5, 13, main, (), False), (12, 31, main, (main,), False)]


def test_a_broken_configuration_is_one_line(tmp_path, capsys):
    root = project(tmp_path)
    (root / "pyproject.toml").write_text("[tool.loadlint]\ntarget = 1\ntarget = 2\n")
    code, out, err = run(capsys, str(write(tmp_path / "t.json", gpu_trace())), "--source", str(root))
    assert (code, out) == (2, "")
    assert err.startswith(f"loadlint: error: {root / 'pyproject.toml'}: invalid TOML") and err.count("\n") == 1, err
