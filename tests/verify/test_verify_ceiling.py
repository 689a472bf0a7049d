"""verify's ceiling never contradicts what it measured: a candidate above
the CPU bound gets the reason the measurement gives (less CPU time per
batch: the training process's intra-op threads, workers not restarted;
or waits the workers overlap)."""

from __future__ import annotations

from loadlint.verify import report

BASE = {"num_workers": 0, "prefetch_factor": None, "persistent_workers": False, "pin_memory": False,
        "multiprocessing_context": None, "timeout": 0, "in_order": True, "pin_memory_device": ""}


def _run(rate: float, cpu: float) -> dict:
    return {"rate": rate, "epochs": [{"start_s": 0.1}, {"start_s": 0.05}], "ttfb_s": 0.1, "steady_batches": 50,
            "steady_s": 1.0, "cpu_s": 1.0, "worker_pss": 1e8, "shm_growth": 0, "data_wait_s": 0.5, "window": {},
            "gate": {"contended": False}, "cpu_per_batch": cpu}


def _report(current: dict, candidate: dict, rates: tuple[float, float], cpu: tuple[float, float], threads: int = 2):
    raw = {
        "call": {"file": "/x/train.py", "line": 10, "end_line": 12, "len": 100, "iterable": False,
                 "class": "torch.utils.data.dataloader.DataLoader"},
        "preflight": {"usable_cpus": 2, "cuda": False, "torch_threads": threads},
        "candidates": [
            {"name": "current", "config": dict(BASE, **current), "equivalence": {"equivalent": True},
             "runs": [_run(rates[0] * f, cpu[0]) for f in (1, 1.01, 0.99, 1, 1, 1)]},
            {"name": "suggested", "config": dict(BASE, **candidate), "equivalence": {"equivalent": True},
             "runs": [_run(rates[1] * f, cpu[1]) for f in (1, 1.01, 0.99, 1, 1, 1)]},
        ],
    }
    return report.build_report(raw, mode="loader", command=[])


def test_within_the_ceiling_nothing_to_explain():
    rep = _report({}, {"num_workers": 2}, (1.0, 1.9), (0.01, 0.01))
    assert rep["ceiling"]["excess"] is None
    assert rep["ceiling"]["text"] == ("at most 2.0x on 2 usable CPUs for CPU-bound loading at the same CPU time "
                                      "per batch (loaders that wait on I/O can exceed it)")


def test_intra_op_threads_of_the_training_process_explain_the_excess():
    # The JPEG loader: 16 ms of CPU an item with 2 torch threads in the training process, 1.6 ms in a worker.
    rep = _report({}, {"num_workers": 2}, (1.0, 7.93), (0.016, 0.0016))
    excess = rep["ceiling"]["excess"]
    assert excess.startswith("suggested measured 7.9")
    assert excess.endswith(
        ", above it: suggested spent 0.10x the CPU time per batch of the call as written (the call as written "
        "loads in the training process, measured with its 2 torch intra-op threads, which contend for the same "
        "CPUs item by item (a worker runs one)), which raises the bound to 20.0x"
    )
    assert f"ceiling: {rep['ceiling']['text']}\n  {excess}\n" in report.render_text(rep)


def test_persistent_workers_explain_the_excess():
    rep = _report({"num_workers": 2}, {"num_workers": 2, "persistent_workers": True}, (1.0, 9.85), (0.05, 0.005))
    assert "(persistent workers are not started again at every epoch), which raises the bound to 20.0x" in (
        rep["ceiling"]["excess"])


def test_waiting_loader_beyond_what_cpu_explains():
    rep = _report({}, {"num_workers": 16}, (1.0, 14.8), (0.01, 0.0094), threads=1)
    assert rep["ceiling"]["excess"].endswith(
        "above it: suggested spent 0.94x the CPU time per batch of the call as written, which raises the bound to "
        "2.1x; the call as written leaves the CPUs idle while it waits (storage, a network, a sleep), and workers "
        "overlap the waits"
    )
