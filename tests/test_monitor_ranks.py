"""loadlint monitor on a distributed run: each rank reports, the report joins
them (a table per rank, each rank's findings under its number, LL303 for a
rank that waits far longer than the others), and ``--tune`` gives each rank
its share of the node's CPUs.  The joining and the share without torch; a
real 2-rank gloo run on CPU under torch.distributed.run (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loadlint.monitor.child import rank_place, worker_cpus
from loadlint.monitor.ranks import join, joined_text
from loadlint.monitor.report import as_json, build

REPO = Path(__file__).resolve().parents[1]

SCRIPT = """\
import hashlib
import sys
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Remote(Dataset):
    def __init__(self, wait):
        self.wait = wait

    def __len__(self):
        return int(sys.argv[2])

    def __getitem__(self, i):
        time.sleep(self.wait)
        return torch.full((4,), float(i))


if __name__ == "__main__":
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    waits = [float(w) for w in sys.argv[1].split(",")]
    dataset = Remote(waits[rank])
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=8, sampler=sampler)
    seen = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for batch in loader:
            dist.all_reduce(batch.sum())
            seen += batch[:, 0].int().tolist()
    digest = hashlib.sha256(repr(seen).encode()).hexdigest()[:16]
    # One write: under PYTHONUNBUFFERED, print writes the newline apart, and the ranks' lines interleave.
    sys.stdout.write(f"rank {rank}: {len(seen)} samples {digest} then {torch.rand(2).tolist()}\\n")
    sys.stdout.flush()
    dist.destroy_process_group()
"""


def _steps(n: int, wait: float, step: float) -> list[list[float]]:
    return [[1.0 + i * (wait + step), wait + step, wait, 0] for i in range(n)]


def _raw(script: Path, rank: int, wait: float, tuning: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "exit_code": 0, "wall_s": 5.0 + rank, "started": 1_765_000_000.0, "cuda": False,
        "loaders": [{
            "index": 0, "file": str(script), "line": 4, "end_line": 4, "class": "torch.utils.data.dataloader.DataLoader",
            "config": {"num_workers": 2, "persistent_workers": True, "prefetch_factor": 2, "pin_memory": False},
            "len": 20, "batch_size": 8, "dataset": "<Remote>", "batches": 20, "iterators": ["_MultiProcessingDataLoaderIter"],
            "pass_starts": [0], "steps": _steps(20, wait, 0.020), "pinned": {"pinned": 0, "pageable": 0, "batch_bytes": 64},
        }],
        "sampling": {"memory": [], "gpu": {"sampled": False, "name": None, "count": 0, "reason": "no NVIDIA GPU", "samples": []}},
        "copies": [], "tuning": tuning, "notes": [f"note of rank {rank}"], "machine": {}, "rank": {"rank": rank},
    }


def _joined(tmp_path: Path, waits: list[float]) -> dict[str, Any]:
    script = tmp_path / "train.py"
    script.write_text("import torch\nfrom torch.utils.data import DataLoader\n\nloader = DataLoader([], num_workers=2, persistent_workers=True)\n")
    command = ["python", "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={len(waits)}", "train.py"]
    reports = [({"rank": r}, build(_raw(script, r, w), command, static=False)) for r, w in enumerate(waits)]
    return join(reports, len(waits), command, 0)


def test_a_straggler_rank_is_ll303_with_its_evidence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    report = _joined(tmp_path, [0.001, 0.030])
    assert [(f["code"], f["evidence"]["rank"]) for f in report["findings"]] == [("LL301", 1), ("LL303", 1)]
    lagging = report["findings"][1]
    assert lagging["message"] == ("rank 1 waits 30.0 ms per step for data, the other ranks' median is 1.0 ms: "
                                  "every rank loses up to 29.0 ms per step at the next collective")
    assert lagging["location"] == {"path": "train.py", "row": 4, "column": 10}
    assert lagging["evidence"]["median_wait_ms"] == 30.0 and lagging["evidence"]["lost_ms_per_step"] == 29.0
    assert report["distributed"] == {"nproc": 2, "ranks_reported": 2, "straggler": 1}
    assert [(r["rank"], r["batches"], r["median_wait_ms"], r["wall_s"]) for r in report["ranks"]] == [
        (0, 20, 1.0, 5.0), (1, 20, 30.0, 6.0)]
    assert report["notes"] == ["rank 0: note of rank 0", "rank 1: note of rank 1"]
    # The top level stays rank 0's: trace's contract for --compare and --plot.
    assert report["summary"]["steps"] == 20 and report["steps"][0]["data_wait_ms"] == 1.0
    text = joined_text(report).splitlines()
    assert text[0] == ("loadlint monitor: python -m torch.distributed.run --standalone --nproc_per_node=2 train.py "
                       "(exit 0, 6.0 s, 2 of 2 ranks reported)")
    assert text[2].split() == ["0", "train.py:4", "num_workers=2,", "prefetch_factor=2,", "persistent_workers=True",
                               "20", "47.6", "1.00", "21.00", "5%", "-"]
    assert "train.py:4:10: LL303 rank 1 waits 30.0 ms per step for data" in joined_text(report)
    assert json.loads(json.dumps(as_json(report)))["ranks"][1]["rank"] == 1


def test_ranks_that_wait_alike_have_no_ll303(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    report = _joined(tmp_path, [0.001, 0.0012])
    assert report["findings"] == [] and report["distributed"]["straggler"] is None
    assert joined_text(report).endswith("No loader bottleneck found in the run.\n")


def test_a_rank_without_measurements_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "train.py"
    script.write_text("x = 1\n")
    report = join([({"rank": 0}, build(_raw(script, 0, 0.001), ["python"], static=False))], 3, ["python"], 1)
    assert report["notes"][-1] == "no measurements from rank 1, 2 (it ended before the monitor could write them)"
    assert report["distributed"] == {"nproc": 3, "ranks_reported": 1, "straggler": None}


def test_each_rank_tunes_within_its_share_of_the_node() -> None:
    assert worker_cpus(16, {"rank": 0, "world_size": 4, "local_rank": 0, "local_world_size": 4}) == 4
    assert worker_cpus(2, {"rank": 1, "world_size": 2, "local_rank": 1, "local_world_size": 2}) == 1
    assert worker_cpus(2, {"rank": 2, "world_size": 3, "local_rank": 2, "local_world_size": 3}) == 1  # at least one
    assert worker_cpus(8, None) == 8


def test_the_rank_is_read_from_torchruns_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    assert rank_place() is None
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert rank_place() == {"rank": 3, "world_size": 4, "local_rank": 1, "local_world_size": 2}
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert rank_place() is None  # one process is not a distributed run


def _run(tmp_path: Path, *command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "GLOO_SOCKET_IFNAME": "lo"}
    return subprocess.run([sys.executable, *command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def _rank_lines(out: str) -> list[str]:
    return sorted(line for line in out.splitlines() if line.startswith("rank ") and " samples " in line)


@pytest.mark.torch
@pytest.mark.slow
def test_two_gloo_ranks_report_and_the_straggler_is_ll303(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    (tmp_path / "train.py").write_text(SCRIPT)
    proc = _run(tmp_path, "-m", "loadlint", "monitor", "--nproc", "2", "-o", "run.json", "train.py", "--", "0,0.004", "256")
    assert proc.returncode == 0, proc.stderr
    assert len(_rank_lines(proc.stdout)) == 2  # the ranks' own output passes through
    assert ("loadlint monitor: python -m torch.distributed.run --standalone --nproc_per_node=2 train.py 0,0.004 256 "
            "(exit 0, ") in proc.stdout
    data = json.loads((tmp_path / "run.json").read_text())
    assert [(r["rank"], r["batches"], r["call"]["row"]) for r in data["ranks"]] == [(0, 32, 30), (1, 32, 30)]
    assert data["distributed"]["straggler"] == 1
    lagging = [f for f in data["findings"] if f["code"] == "LL303"]
    assert len(lagging) == 1 and lagging[0]["location"] == {"path": "train.py", "row": 30, "column": 14}
    assert lagging[0]["evidence"]["median_wait_ms"] > 2 * lagging[0]["evidence"]["median_wait_other_ranks_ms"]
    assert "train.py:30:14: LL303 rank 1 waits " in proc.stdout


@pytest.mark.torch
@pytest.mark.slow
def test_tuned_ranks_share_the_node_and_keep_the_data(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from loadlint.hardware.cpus import usable_here

    (tmp_path / "train.py").write_text(SCRIPT)
    args = ("train.py", "0.002,0.002", "1024")
    plain = _run(tmp_path, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *args)
    assert plain.returncode == 0, plain.stderr
    tuned = _run(tmp_path, "-m", "loadlint", "monitor", "--nproc", "2", "--tune", "-o", "run.json", args[0], "--", *args[1:])
    assert tuned.returncode == 0, tuned.stderr
    assert _rank_lines(tuned.stdout) == _rank_lines(plain.stdout) and len(_rank_lines(plain.stdout)) == 2
    data = json.loads((tmp_path / "run.json").read_text())
    share = max(1, usable_here() // 2)
    assert [r["tuning"]["worker_cpus"] for r in data["ranks"]] == [share, share]
    assert f"rank 1: tuning within {share} of the node's {usable_here()} usable CPUs (2 ranks on the node)" in data["notes"]
    assert all(w["config"] == 0 for w in data["tuning"]["windows"][:1])  # the search began as written
    assert len(data["tuning"]["windows"]) >= 2  # and tried a candidate


@pytest.mark.torch
@pytest.mark.slow
def test_ctrl_c_still_reports_every_rank(tmp_path: Path) -> None:
    import signal

    pytest.importorskip("torch")
    (tmp_path / "forever.py").write_text(
        "import time\nimport torch.distributed as dist\nfrom torch.utils.data import DataLoader\n"
        "dist.init_process_group('gloo')\n"
        "loader = DataLoader(range(10**6), batch_size=4)\n"
        "for i, batch in enumerate(loader):\n"
        "    time.sleep(0.01)\n"
        "    if i == 5 and dist.get_rank() == 0:\n        print('ready', flush=True)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "GLOO_SOCKET_IFNAME": "lo"}
    # SIG_DFL: a test run started in the background inherits SIGINT ignored, and Ctrl-C would do nothing.
    proc = subprocess.Popen([sys.executable, "-m", "loadlint", "monitor", "--nproc", "2", "forever.py"], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: torch.distributed.run stops the ranks
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert "2 of 2 ranks reported)" in out
    assert "     0  forever.py:5 " in out and "     1  forever.py:5 " in out
