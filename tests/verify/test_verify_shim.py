"""Pieces of the shim that need no subprocess: data identity, config
normalisation and the per-run rate."""

from __future__ import annotations

import pytest

from loadlint.verify import shim


def test_compare_iterable_counts_duplicates():
    ref = {"digests": ["a", "b", "c", "d"], "complete": True}
    dup = {"digests": ["a", "a", "b", "b", "c", "c", "d", "d"], "complete": True}
    v = shim.compare_iterable(ref, dup)
    assert not v["equivalent"] and "4 duplicated samples" in v["how"]
    same = shim.compare_iterable(ref, {"digests": ["c", "a", "d", "b"], "complete": True})
    assert same["equivalent"]


def test_compare_iterable_truncated_uses_duplicates_only():
    ref = {"digests": list("abcdef"), "complete": False}
    assert shim.compare_iterable(ref, {"digests": list("adbecf"), "complete": False})["equivalent"]
    assert not shim.compare_iterable(ref, {"digests": list("aabbcc"), "complete": False})["equivalent"]


def test_config_without_workers_drops_worker_only_keywords():
    out = shim.config_to_kwargs({"num_workers": 0, "prefetch_factor": 4, "persistent_workers": True},
                                {"num_workers": 2})
    assert out["prefetch_factor"] is None and out["persistent_workers"] is False
    assert out["multiprocessing_context"] is None and out["timeout"] == 0


def test_run_rate_projects_the_real_epoch():
    run = {"steady_batches": 100, "steady_s": 2.0, "ttfb_s": 1.0,
           "epochs": [{"start_s": 1.0}, {"start_s": 0.5}, {"start_s": 0.5}]}
    # start-up of a later epoch (0.5 s) + 1000 batches at 50 batches/s
    assert shim.run_rate(run, 1000, False) == pytest.approx(1 / 20.5)
    assert shim.run_rate(run, None, True) == pytest.approx(50.0)


def test_rotation():
    assert shim._rotate([1, 2, 3], 1) == [2, 3, 1]
    assert shim._rotate([1, 2, 3], 3) == [1, 2, 3]


@pytest.mark.torch
def test_sample_digests_one_per_row():
    torch = pytest.importorskip("torch")
    batch = [torch.arange(6).reshape(3, 2), torch.tensor([7, 8, 9])]
    d = shim.sample_digests(batch, True)
    assert len(d) == 3 and len(set(d)) == 3
    again = shim.sample_digests([torch.arange(6).reshape(3, 2)[[2, 0, 1]], torch.tensor([9, 7, 8])], True)
    assert sorted(again) == sorted(d)
    assert shim.sample_digests({"x": torch.zeros(2, 2), "name": ["a", "b"]}, True)[0] != \
        shim.sample_digests({"x": torch.zeros(2, 2), "name": ["a", "b"]}, True)[1]
