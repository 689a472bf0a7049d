"""loadlint monitor without torch: the report built from measurements, its
JSON read back by ``loadlint trace``, ``fix --from-verify`` on a tuned
report, the tuner's feed and windows, the status line, NVML through a fake
module, the trainer callbacks' clock and the copy timer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from loadlint.monitor import report as mreport
from loadlint.monitor.instrument import LoaderLog, Monitor, copy_hook
from loadlint.monitor.sampling import Nvml, Sampler
from loadlint.monitor import runners
from loadlint.monitor.tuner import WAITING, Feed, Tuner
from loadlint.monitor.windows import amortized, window_done
from loadlint.monitor.watch import make_hf_callback, make_lightning_callback

REPO = Path(__file__).resolve().parents[1]

SCRIPT = """\
import torch
from torch.utils.data import DataLoader
from storage import Remote
loader = DataLoader(Remote(), batch_size=4)
if __name__ == "__main__":
    for epoch in range(2):
        for batch in loader:
            loss = batch.float().mean()
"""


def _steps(n: int, wait: float, step: float, config: int = 0, start: float = 1.0) -> list[list[float]]:
    return [[start + i * (wait + step), wait + step, wait, config] for i in range(n)]


def raw_run(script: Path, *, steps: list[list[float]] | None = None, tuning: dict[str, Any] | None = None,
            iterators: tuple[str, ...] = ("_SingleProcessDataLoaderIter",), gpu: list[list[float]] | None = None) -> dict[str, Any]:
    """What the monitored process leaves: one loader at line 4 of ``script``."""
    return {
        "exit_code": 0, "wall_s": 10.0, "started": 1_765_000_000.0, "cuda": False,
        "loaders": [{
            "index": 0, "file": str(script), "line": 4, "end_line": 4, "class": "torch.utils.data.dataloader.DataLoader",
            "config": {"num_workers": 0, "persistent_workers": False, "prefetch_factor": None, "pin_memory": False},
            "len": 16, "batch_size": 4, "dataset": "<list of 64>", "batches": 20, "iterators": list(iterators),
            "pass_starts": [0], "steps": steps if steps is not None else _steps(20, 0.040, 0.002),
            "pinned": {"pinned": 0, "pageable": 0, "batch_bytes": 64},
        }],
        "sampling": {"memory": [], "gpu": {"sampled": gpu is not None, "name": "Fake GPU" if gpu else None,
                                           "count": 1 if gpu else 0, "reason": None if gpu else "no NVIDIA GPU",
                                           "samples": gpu or []}},
        "copies": [], "tuning": tuning, "notes": [], "machine": {"usable_cpus": 2, "gpu_count": 0},
    }


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return path


def test_waiting_loader_is_ll201_at_its_call_with_the_static_finding(script: Path) -> None:
    report = mreport.build(raw_run(script), ["python", "train.py"])
    data = mreport.as_json(report)
    assert [f["code"] for f in data["findings"]] == ["LL201"]
    assert data["findings"][0]["location"] == {"path": "train.py", "row": 4, "column": 10}
    assert data["findings"][0]["message"].endswith(
        "median step 42.0 ms, 2.0 ms without the wait (95% of it); over the run data wait is 95% of the step time")
    assert data["schema"] == "loadlint.monitor/1" and next(iter(data)) == "schema"
    assert data["summary"]["steps"] == 20 and data["summary"]["data_wait_share"] == 0.952
    text = mreport.as_text(report)
    assert "train.py:4:10: LL201 DataLoader loads in the training process (num_workers=0)" in text
    assert "  = static: train.py:4:10: LL201 " in text
    assert text.endswith("Found 1 finding in the run.\n")


def test_a_loader_that_keeps_up_has_no_finding(script: Path) -> None:
    report = mreport.build(raw_run(script, steps=_steps(20, 0.0001, 0.020)), ["python", "train.py"])
    assert report["findings"] == []
    assert mreport.as_text(report).endswith("No loader bottleneck found in the run.\n")


def test_workers_that_still_wait_are_ll301(script: Path) -> None:
    report = mreport.build(raw_run(script, iterators=("_MultiProcessingDataLoaderIter",)), ["python", "train.py"])
    assert [f["code"] for f in report["findings"]] == ["LL301"]


def test_sampled_gpu_idle_while_waiting_is_ll302(script: Path) -> None:
    gpu = [[1.0 + i * 0.05, 5.0, 120.0] for i in range(40)]
    report = mreport.build(raw_run(script, gpu=gpu), ["python", "train.py"])
    assert [f["code"] for f in report["findings"]] == ["LL201", "LL302"]
    assert report["steps"][0]["gpu_busy_ms"] == pytest.approx(2.1, abs=0.01)
    assert "utilisation mean 5%, PCIe receive mean 120 MB/s" in mreport.as_text(report)


def _tuning(verdict: str = "confirmed") -> dict[str, Any]:
    written = {"num_workers": 0, "persistent_workers": False, "prefetch_factor": None, "pin_memory": False}
    tuned = {"num_workers": 8, "persistent_workers": True, "prefetch_factor": 2, "pin_memory": False}
    return {"loader": 0, "before": {"config": written, "batches_per_s": 18.0},
            "after": {"config": tuned if verdict == "confirmed" else written, "batches_per_s": 150.0},
            "speedup": 8.4, "verdict": verdict, "reason": "99% interval 5.00x-14.00x over 3 pairs, above the 1.05x threshold",
            "compared": tuned, "interval": [5.0, 14.0], "busy": 0.02, "state": "done", "points": [], "windows": [],
            "failed": None, "tuned_at_s": 4.0, "started_at_s": 1.0}


def test_fix_from_verify_applies_a_confirmed_tuning(script: Path, tmp_path: Path) -> None:
    report = mreport.build(raw_run(script, tuning=_tuning()), ["python", "train.py"])
    assert report["tuning"]["share_of_run_tuning"] == 0.4
    assert report["call_sites"][0]["best"] == {"num_workers": 8, "persistent_workers": True}
    path = tmp_path / "report.json"
    path.write_text(json.dumps(mreport.as_json(report)))
    proc = subprocess.run([sys.executable, "-m", "loadlint", "fix", "--from-verify", str(path), str(script)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert script.read_text().splitlines()[3] == (
        "loader = DataLoader(Remote(), batch_size=4, num_workers=8, persistent_workers=True)  "
        "# loadlint: measured 8.40x on 2 CPUs, 2025-12-06")


def test_fix_from_verify_leaves_an_unconfirmed_tuning_alone(script: Path, tmp_path: Path) -> None:
    report = mreport.build(raw_run(script, tuning=_tuning("inconclusive")), ["python", "train.py"])
    path = tmp_path / "report.json"
    path.write_text(json.dumps(mreport.as_json(report)))
    proc = subprocess.run([sys.executable, "-m", "loadlint", "fix", "--from-verify", str(path), str(script)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 1
    assert script.read_text() == SCRIPT


def test_trace_compare_and_plot_read_monitor_reports(script: Path, tmp_path: Path) -> None:
    slow = mreport.as_json(mreport.build(raw_run(script), ["python", "train.py"]))
    fast = mreport.as_json(mreport.build(raw_run(script, steps=_steps(20, 0.0001, 0.002)), ["python", "train.py"]))
    (tmp_path / "before.json").write_text(json.dumps(slow, indent=2))
    (tmp_path / "after.json").write_text(json.dumps(fast, indent=2))
    proc = subprocess.run([sys.executable, "-m", "loadlint", "trace", "--compare", "before.json", "after.json",
                           "--output-format", "json"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["step_time_ratio"] == 20.0
    assert data["before"]["findings"][0]["code"] == "LL201"
    pytest.importorskip("matplotlib")
    proc = subprocess.run([sys.executable, "-m", "loadlint", "trace", "before.json", "--plot", "p.png"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr  # findings
    assert (tmp_path / "p.png").stat().st_size > 1000
    assert "before.json:4:10: LL201" not in proc.stdout and "train.py:4:10: LL201" in proc.stdout


def test_trace_rejects_a_monitor_report_without_steps(tmp_path: Path) -> None:
    (tmp_path / "empty.json").write_text('{\n  "schema": "loadlint.monitor/1",\n  "summary": {}, "steps": [], "findings": []}')
    proc = subprocess.run([sys.executable, "-m", "loadlint", "trace", "empty.json"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == "loadlint: error: empty.json: the monitor report has no steps (no DataLoader was iterated)\n"


# -- the tuner's parts -------------------------------------------------------


def test_feed_gives_back_what_a_failed_loader_pulled_in_order() -> None:
    feed = Feed(iter([[0, 1], [2, 3], [4, 5], [6, 7]]))
    stream = feed.stream()
    assert next(stream) == [0, 1] and next(stream) == [2, 3]
    feed.outstanding.popleft()  # [0, 1] was delivered
    feed.give_back()
    assert [feed.pull(), feed.pull(), feed.pull()] == [[2, 3], [4, 5], [6, 7]]
    with pytest.raises(StopIteration):
        feed.pull()
    assert feed.done


def test_a_stopping_feed_ends_the_stream_without_pulling() -> None:
    feed = Feed(iter([[0], [1]]))
    feed.stopping = True
    assert list(feed.stream()) == []
    assert feed.pull() == [0]


@pytest.mark.parametrize("phase", [0, 3, 7])
def test_windows_count_whole_rounds_of_the_workers(phase: int) -> None:
    # 8 workers waiting on the same storage: 8 batches arrive together every
    # 48 ms.  Wherever the window starts, it holds whole rounds of 8 batches.
    w: dict[str, Any] = {"config": 1, "n": 0, "elapsed": 0.0, "workers": 8}
    gaps = (([0.0003] * 7 + [0.046]) * 12)[phase:]
    for gap in gaps:
        w["n"] += 1
        w["elapsed"] += gap
        if window_done(w):
            break
    assert w["n"] == 24  # 0.1 s at least: three rounds
    assert w["n"] / w["elapsed"] == pytest.approx(8 / (7 * 0.0003 + 0.046))


def test_workers_past_the_cpus_are_counted_in_whole_turns() -> None:
    # 4 CPU-bound workers on 2 CPUs: two batches every 0.2 s.  A window of
    # two batches would measure 10 or 5000 batches/s depending on where it fell.
    w: dict[str, Any] = {"config": 2, "n": 0, "elapsed": 0.0, "workers": 4}
    for gap in [0.0002, 0.2] * 4:
        w["n"] += 1
        w["elapsed"] += gap
        if window_done(w):
            break
    assert w["n"] == 4 and w["n"] / w["elapsed"] == pytest.approx(4 / 0.4004)


def test_a_workers_start_is_paid_over_the_horizon() -> None:
    # 32 workers at 200 batches/s: a round of 32 batches takes 0.16 s; the
    # first batch came 2.16 s after the start, so 2 s are lost.
    assert amortized(2.16, 32, 200.0, 400) == pytest.approx(2.0 / 4.0)  # 400 batches: 2 s of loading
    assert amortized(2.16, 32, 200.0, 40_000) == pytest.approx(200 / 202)  # a long run hardly pays it
    assert amortized(0.1, 32, 200.0, 400) == 1.0  # no slower than the steady rate: nothing lost
    assert amortized(1.0, 0, 0.0, 400) == 1.0


def test_steady_windows_end_on_time() -> None:
    w: dict[str, Any] = {"config": 0, "n": 0, "elapsed": 0.0, "workers": 0}
    for i in range(100):
        w["n"] += 1
        w["elapsed"] += 0.05
        if window_done(w):
            break
    assert w["n"] == 5


@pytest.mark.parametrize(("cpu_ms", "waiting"), [(0.5, True), (4.0, False)])
def test_busy_leaves_out_the_wait_for_a_cpu(monkeypatch: pytest.MonkeyPatch, cpu_ms: float, waiting: bool) -> None:
    # On a loaded machine each fetch spends 6 of its 10 ms waiting for a CPU:
    # a loader that sleeps on storage computes 0.5 ms of the other 4, a
    # CPU-bound one all 4.
    clock = {"wall": 0.0, "cpu": 0.0, "ready": 0.0}

    class Fetcher:
        def fetch(self, index: Any) -> Any:
            clock["wall"] += 0.010
            clock["ready"] += 0.006
            clock["cpu"] += cpu_ms / 1e3
            return index

    monkeypatch.setattr(runners, "time", types.SimpleNamespace(perf_counter=lambda: clock["wall"], thread_time=lambda: clock["cpu"]))
    monkeypatch.setattr(runners, "ready_seconds", lambda: clock["ready"])
    single = object.__new__(runners.InProcess)
    single.fetcher, single.pin, single.cpu, single.wall = Fetcher(), False, 0.0, 0.0
    feed = Feed(iter([[0], [1], [2]]))
    assert [single.next(feed) for _ in range(3)] == [[0], [1], [2]]
    assert single.cpu / single.wall == pytest.approx(cpu_ms / 4.0)
    assert (single.cpu / single.wall < WAITING) is waiting


def test_best_keywords_drop_defaults() -> None:
    assert mreport.best_keywords({"num_workers": 16, "persistent_workers": True, "prefetch_factor": 2, "pin_memory": False}) == {
        "num_workers": 16, "persistent_workers": True}
    assert mreport.best_keywords({"num_workers": 4, "persistent_workers": True, "prefetch_factor": 4, "pin_memory": True}) == {
        "num_workers": 4, "persistent_workers": True, "prefetch_factor": 4, "pin_memory": True}


# -- sampling ---------------------------------------------------------------


class _Loader:
    batch_size = 4
    dataset = [1, 2, 3]
    num_workers = 0
    persistent_workers = False
    prefetch_factor = None
    pin_memory = False

    def __len__(self) -> int:
        return 3


def test_status_line_shows_wait_share_and_rate() -> None:
    monitor = Monitor()
    log = monitor.register(_Loader(), ("/x/train.py", 12, 12))
    log.new_pass("_SingleProcessDataLoaderIter")
    t = 0.0
    for _ in range(11):
        log.called(t)
        log.got(t, 0.03)
        t += 0.04
    sampler = Sampler(monitor)
    assert sampler.status_text() == "loadlint monitor: train.py:12 data wait 75%, 25.0 batches/s"


def test_memory_samples_of_many_workers_space_out(monkeypatch: pytest.MonkeyPatch) -> None:
    from loadlint.monitor import sampling

    clock = {"now": 10.0}
    monitor = Monitor()
    monitor.clock = lambda: clock["now"]  # type: ignore[method-assign]
    monitor.workers = lambda: list(range(32))  # type: ignore[method-assign]

    def slow(pids: list[int]) -> tuple[int, int]:
        clock["now"] += 0.003 * len(pids)  # reading each worker's memory takes 3 ms
        return 1 << 20, 2 << 20

    monkeypatch.setattr(sampling, "pid_memory", slow)
    sampler = Sampler(monitor)
    assert sampler._memory(10.0) == pytest.approx(10.0 + 20 * 0.096)  # a 96 ms sample: the next in 1.92 s, not 1 s
    monitor.workers = lambda: [1]  # type: ignore[method-assign]
    assert sampler._memory(clock["now"]) == pytest.approx(clock["now"] - 0.003 + 1.0)
    assert [m["workers"] for m in monitor.memory] == [32, 1]


def test_nvml_samples_through_a_fake_module(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("pynvml")
    fake.NVML_PCIE_UTIL_RX_BYTES = 1  # type: ignore[attr-defined]
    fake.nvmlInit = lambda: None  # type: ignore[attr-defined]
    fake.nvmlDeviceGetCount = lambda: 2  # type: ignore[attr-defined]
    fake.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    fake.nvmlDeviceGetName = lambda h: b"Fake GPU"  # type: ignore[attr-defined]
    fake.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=30 + 40 * h)  # type: ignore[attr-defined]
    fake.nvmlDeviceGetPcieThroughput = lambda h, kind: 2000  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    nvml = Nvml()
    assert nvml.name == "Fake GPU" and len(nvml.handles) == 2
    assert nvml.sample() == (50.0, 4.0)


def test_no_nvml_means_no_gpu_sampling(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("pynvml")

    def missing() -> None:
        raise OSError("NVML Shared Library Not Found")

    fake.nvmlInit = missing  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    nvml = Nvml()
    assert nvml.sample() is None
    assert nvml.reason == "no NVIDIA GPU (OSError: NVML Shared Library Not Found)"


# -- the copy timer and the callbacks -----------------------------------------


class _Device:
    def __init__(self, kind: str) -> None:
        self.type = kind


class _Tensor:
    def __init__(self, kind: str, pinned: bool = False) -> None:
        self.device = _Device(kind)
        self.nbytes = 4096
        self._pinned = pinned

    def is_pinned(self) -> bool:
        return self._pinned

    def to(self, device: str, non_blocking: bool = False) -> "_Tensor":
        return _Tensor(device)


def test_copy_hook_records_host_to_device_copies_only() -> None:
    monitor = Monitor()
    to = copy_hook(monitor, _Tensor.to)
    to(_Tensor("cpu"), "cuda")
    to(_Tensor("cpu", pinned=True), "cuda", non_blocking=True)
    to(_Tensor("cpu"), "cpu")
    to(_Tensor("cuda"), "cuda")
    assert [(n, pinned, blocking) for _, n, pinned, _, blocking in monitor.copies] == [(4096, False, True), (4096, True, False)]


@pytest.mark.parametrize("make", [make_lightning_callback, make_hf_callback])
def test_trainer_callbacks_time_the_wait_between_steps(make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import loadlint.monitor.watch as watch

    monkeypatch.setattr(watch, "_RECORDER", [])
    callback = make(object)()
    clock = iter([0.0, 0.030, 0.040, 0.070, 0.080, 0.110, 0.120])
    monkeypatch.setattr(callback.clock.recorder.monitor, "clock", lambda: next(clock))
    trainer = types.SimpleNamespace(train_dataloader=_Loader())
    hf = make is make_hf_callback
    start = (lambda: callback.on_epoch_begin(None, None, None, train_dataloader=trainer.train_dataloader)) if hf else (
        lambda: callback.on_train_epoch_start(trainer, None))
    begin = (lambda: callback.on_step_begin(None, None, None, train_dataloader=trainer.train_dataloader)) if hf else (
        lambda: callback.on_train_batch_start(trainer, None, None, 0))
    end = (lambda: callback.on_step_end(None, None, None)) if hf else (lambda: callback.on_train_batch_end(trainer, None, None, None, 0))
    finish = (lambda: callback.on_epoch_end(None, None, None)) if hf else (lambda: callback.on_train_epoch_end(trainer, None))
    start()
    for _ in range(3):
        begin()
        end()
    finish()
    log: LoaderLog = callback.clock.log
    assert list(log.dur) == pytest.approx([0.040, 0.040, 0.040])
    assert list(log.wait) == pytest.approx([0.030, 0.030, 0.030])
    watch._RECORDER[0].sampler.finish()


def test_lightning_callback_needs_lightning() -> None:
    from loadlint.monitor.watch import lightning_callback

    try:
        import lightning  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"the Lightning callback needs lightning \(pip install lightning\)"):
            lightning_callback()
    else:
        pytest.importorskip("torch")
        assert hasattr(lightning_callback(), "on_train_batch_start")


def test_the_static_core_can_import_without_the_monitor() -> None:
    code = "import sys, loadlint.api; print(any(m.startswith('loadlint.monitor') for m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout == "False\n"


def _drive(rate_of: Any, usable: int = 2, busy: float = 0.02, copies: bool = False, on_plan: Any = None) -> Tuner:
    """The tuner's search on a model of the loop's rate per configuration."""
    monitor = Monitor()
    if copies:
        monitor.copies.append((0.0, 1 << 20, False, 0.001, True))
    tuner = Tuner(None, monitor, _Loader(), monitor.register(_Loader(), ("/x/train.py", 3, 3)), usable)
    tuner.busy, tuner.phase = busy, "workers"
    tuner._plan()
    while tuner.state == "tuning":
        assert tuner.queue, "the search stopped without a decision"
        rounds = list(tuner.queue)
        tuner.queue.clear()
        for i in range(0, len(rounds), 2):
            cid = rounds[i] or rounds[i + 1]
            tuner.pairs.setdefault(cid, []).append((rate_of(tuner.written), rate_of(tuner.configs[cid])))
        if on_plan is not None:
            on_plan(tuner)
        tuner._plan()
    return tuner


def _io_rate(config: dict[str, Any]) -> float:
    # Items wait on storage: the rate grows with the workers up to 24 of them.
    nw = config.get("num_workers") or 0
    return 18.0 * max(1, min(nw, 24)) * (1.1 if config.get("prefetch_factor") == 4 else 1.0) * (0.97 + 0.01 * (nw % 3))


def test_the_runs_first_window_only_measures_how_busy_loading_is() -> None:
    monitor = Monitor()
    tuner = Tuner(None, monitor, _Loader(), monitor.register(_Loader(), ("/x/train.py", 3, 3)), 2)
    first = {"config": 0, "batches": 2, "seconds": 0.3, "batches_per_s": 6.7, "busy": 0.02}
    tuner.windows.append(first)
    tuner._after_window(first)
    assert tuner.busy == 0.02 and tuner.phase == "workers"
    assert tuner.pending_round == [] and tuner.pairs == {}
    eight = tuner.probed[8]  # a waiting loader starts high
    assert list(tuner.queue) == [0, eight]  # a whole round of its own, as written first


def test_a_cold_first_window_does_not_make_a_cpu_bound_loader_wait() -> None:
    # The run's first window read cold files (busy 0.3); the windows as
    # written after it decode at full speed: the search does not go past
    # twice the usable CPUs, and walks down from its high start.
    monitor = Monitor()
    tuner = Tuner(None, monitor, _Loader(), monitor.register(_Loader(), ("/x/train.py", 3, 3)), 2)
    first = {"config": 0, "batches": 2, "seconds": 0.3, "batches_per_s": 6.7, "busy": 0.3}
    tuner.windows.append(first)
    tuner._after_window(first)
    assert sorted(tuner.probed) == [8]
    tuner.windows.append({"config": 0, "batches": 4, "seconds": 0.3, "batches_per_s": 13.0, "busy": 0.99})
    assert not tuner._waiting() and tuner.as_json()["busy"] == 0.99
    assert tuner._workers(16) is None and tuner._workers(4) is not None


def test_the_search_climbs_high_first_for_a_waiting_loader_and_confirms() -> None:
    tuner = _drive(_io_rate)
    assert sorted(tuner.probed) == [8, 16, 32]  # at most 16 per usable CPU; nothing above the top to bisect
    assert tuner.configs[tuner.final] == {"num_workers": 32, "persistent_workers": True, "prefetch_factor": 4, "pin_memory": False}
    assert tuner.decision is not None and tuner.decision.verdict == "confirmed"
    assert len(tuner.pairs[tuner.final]) == 3


def test_a_loader_that_gains_nothing_ends_as_written() -> None:
    tuner = _drive(lambda config: 50.0 / (1 + 0.1 * (config.get("num_workers") or 0)), busy=0.9)
    assert sorted(tuner.probed) == [1, 2, 4]  # the usable CPUs, then half, then double
    assert tuner.final == 0 and tuner.state == "done"


def test_an_unlucky_first_round_of_a_cheaper_point_is_measured_again() -> None:
    # CPU-bound on 2 CPUs: two workers are 2.0x the loop as written, four
    # 1.85x; the first round of two workers came out at 1.6x (a busy moment).
    unlucky = {"first": True}

    def rate(config: dict[str, Any]) -> float:
        nw = config.get("num_workers") or 0
        if nw == 2 and unlucky.pop("first", False):
            return 16.0
        return {0: 10.0, 1: 11.0, 2: 20.0, 4: 18.5}.get(nw, 17.0)

    tuner = _drive(rate, busy=0.95)
    assert sorted(tuner.probed) == [2, 4]  # CPU-bound: no more than twice the usable CPUs
    two = tuner.probed[2]
    assert [round(b / a, 2) for a, b in tuner.pairs[two]][:2] == [1.6, 2.0]  # measured again before the choice
    assert tuner.configs[tuner.final]["num_workers"] == 2 and tuner.decision is not None
    assert tuner.decision.verdict == "confirmed"
    # CPU-bound workers are bound by the CPUs: no deeper prefetch is tried.
    assert not any(c.get("prefetch_factor") == 4 for c in tuner.configs)


def test_many_workers_that_start_slowly_lose_to_fewer() -> None:
    # 32 workers measure 3 % faster than 16 between windows, but their start
    # takes 3 s (1.3 s for 16): over the run so far (800 batches), 16 lead.
    def drive_with_starts(tuner: Tuner) -> None:
        tuner.log.batches = 800
        for cid, config in enumerate(tuner.configs):
            nw = config.get("num_workers") or 0
            if nw and cid not in tuner.first_batch:
                tuner.first_batch[cid] = {8: 0.8, 16: 1.3, 32: 3.0}.get(nw, 1.0)
                tuner.windows.append({"config": cid, "batches_per_s": rate(config)})

    def rate(config: dict[str, Any]) -> float:
        return 18.0 * min(config.get("num_workers") or 1, 16) * (1.03 if config.get("num_workers") == 32 else 1.0)

    tuner = _drive(rate, on_plan=drive_with_starts)
    assert sorted(tuner.probed) == [8, 12, 16, 32]  # 12: between the leader and the slower 8
    assert tuner.configs[tuner.final]["num_workers"] == 16
    thirty_two = tuner.probed[32]
    assert tuner._ratio(thirty_two) < tuner._ratio(tuner.probed[16]) < 16.0


def test_pinned_memory_is_tried_only_where_pageable_copies_to_a_gpu_follow() -> None:
    assert not any(c.get("pin_memory") for c in _drive(_io_rate).configs)
    tuner = _drive(lambda c: _io_rate(c) * (1.3 if c.get("pin_memory") else 1.0), copies=True)
    assert tuner.configs[tuner.final]["pin_memory"] is True


@pytest.mark.parametrize(("args", "message"), [
    (["nope.py"], "loadlint: error: nope.py: no such file\n"),
    ([], "loadlint: error: missing argument 'SCRIPT' (see 'loadlint monitor --help')\n"),
])
def test_usage_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "loadlint", "monitor", *args], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == message and proc.stdout == ""
