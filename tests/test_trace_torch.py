"""``loadlint trace`` on traces that torch.profiler records here, on the CPU:
0 and 2 workers, a slow and a fast dataset, with_stack on and off,
tensorboard_trace_handler with a schedule, and two ranks under
torch.distributed.run (gloo)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loadlint.frontends.cli import main

pytestmark = pytest.mark.torch
pytest.importorskip("torch")

RECORD = Path(__file__).parent / "fixtures" / "trace" / "record.py"
LOADER_ROW = next(i for i, line in enumerate(RECORD.read_text().splitlines(), 1) if "DataLoader(" in line and "=" in line)


def record(tmp_path: Path, name: str, *args: str, ranks: bool = False) -> tuple[Path, Path]:
    """(the folder of traces, the recorded project's copy of the script)."""
    project = tmp_path / f"{name}_project"
    project.mkdir()
    script = shutil.copy(RECORD, project / "record.py")
    out = tmp_path / name
    out.mkdir()
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29561"] if ranks \
        else [sys.executable]
    subprocess.run([*launcher, str(script), str(out), *args, *(["--ranks"] if ranks else [])],
                   cwd=project, check=True, capture_output=True, timeout=240)
    return out, project


def trace(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict, str]:
    code = main(["trace", *argv, "--output-format", "json"])
    out, err = capsys.readouterr()
    assert out.startswith("{"), err  # the one-line error, when there is no report
    return code, json.loads(out), err


# Items wait on the wall clock, so a busy machine slows the loop's compute,
# not the loading: 20 ms items keep the wait dominant on a shared CI runner
# (at 4 ms a loaded runner's compute brought the wait share under 10 %).
def test_no_workers_slow_dataset_with_stack_maps_to_the_call(tmp_path, capsys, monkeypatch):
    out, project = record(tmp_path, "slow0", "--workers", "0", "--item-ms", "20", "--stack")
    monkeypatch.chdir(project)  # the stack's file names are relative to where the script ran
    code, data, err = trace(capsys, str(out / "trace.json"))
    assert code == 1
    assert data["summary"]["gpu_busy_share"] is None and data["summary"]["device"] == "cpu"
    assert data["summary"]["data_wait_share"] > 0.3
    (ll201,) = [f for f in data["findings"] if f["code"] == "LL201"]
    assert ll201["location"] == {"path": "record.py", "row": LOADER_ROW, "column": 14}
    assert ll201["evidence"]["location_confidence"] == "high"
    assert "no GPU events" in err


def test_slow_against_fast_dataset(tmp_path, capsys):
    slow, _ = record(tmp_path, "slow", "--workers", "0", "--item-ms", "5")
    fast, _ = record(tmp_path, "fast", "--workers", "0", "--item-ms", "0")
    code, data, _ = trace(capsys, "--compare", str(slow / "trace.json"), str(fast / "trace.json"))
    assert data["before"]["summary"]["data_wait_share"] > data["after"]["summary"]["data_wait_share"]
    # The machine may be shared: the direction, not a speed-up figure.
    assert data["step_time_ratio"] > 1


def test_two_workers_schedule_and_trace_handler(tmp_path, capsys):
    out, project = record(tmp_path, "sched", "--workers", "2", "--item-ms", "1", "--schedule")
    files = sorted(out.iterdir())
    assert len(files) == 2  # one per cycle of the schedule
    code, data, _ = trace(capsys, str(out))
    assert [r["summary"]["steps"] for r in data["ranks"]] == [3, 3]
    assert all(f["code"] != "LL303" for r in data["ranks"] for f in r["findings"])  # cycles of one rank
    code = main(["trace", str(files[0])])
    text = capsys.readouterr().out
    assert "3 steps, _MultiProcessingDataLoaderIter)" in text.splitlines()[0]
    assert "inferred" not in text.splitlines()[0]


def test_without_stack_source_matches_by_iterator(tmp_path, capsys):
    out, project = record(tmp_path, "w2", "--workers", "2", "--item-ms", "20")
    code, data, _ = trace(capsys, str(out / "trace.json"), "--source", str(project))
    located = [f for f in data["findings"] if f["location"]]
    assert located and all(f["location"]["row"] == LOADER_ROW for f in located)
    assert {f["evidence"]["location_confidence"] for f in located} == {"medium"}


def test_two_ranks_under_torch_distributed_run(tmp_path, capsys):
    out, _ = record(tmp_path, "ranks", "--workers", "0", "--item-ms", "1", ranks=True)
    code, data, _ = trace(capsys, str(out))
    assert code == 1
    assert len(data["ranks"]) == 2
    codes = [[f["code"] for f in r["findings"]] for r in data["ranks"]]
    assert "LL303" not in codes[0] and "LL303" in codes[1]
