"""The decision rule, the contention gate and the report's arithmetic on
synthetic timings: no torch, no subprocess."""

from __future__ import annotations

import math

import pytest

from loadlint.verify import ddp, measure, report


def runs(rates, **kw):
    """Runs of one configuration, one per round, in round order."""
    return [measure.Run(round=i, rate=r, **kw) for i, r in enumerate(rates)]


def test_sign_interval_order_statistics():
    # Six values: the whole range (coverage 1 - 2/64); nine: the 2nd smallest
    # and 2nd largest (coverage 1 - 2 * 10/512).
    iv = measure.sign_interval([3, 1, 2, 6, 5, 4])
    assert (iv.low, iv.high, iv.n) == (1, 6, 6) and iv.level == pytest.approx(1 - 2 / 64)
    iv = measure.sign_interval(list(range(1, 10)))
    assert (iv.low, iv.high) == (2, 8) and iv.level == pytest.approx(1 - 20 / 512)
    assert measure.sign_interval([1.0, 2.0, 3.0]).level == pytest.approx(0.75)
    assert measure.sign_interval([]) is None


def test_confirmed_when_the_interval_clears_the_threshold():
    d = measure.decide(runs([1.0, 1.01, 0.99, 1.0, 1.02, 1.0]),
                       runs([1.8, 1.85, 1.9, 1.82, 1.88, 1.86]))
    assert d.verdict == "confirmed"
    assert d.speedup == pytest.approx(1.85, rel=0.01)
    assert d.threshold == pytest.approx(1.05)
    assert d.interval.low > 1.75 and d.pairs == 6


def test_pairs_follow_rounds_not_order():
    # A drift that moves both configurations together cancels in the pairs.
    current = [measure.Run(round=i, rate=1.0 + 0.1 * i) for i in range(6)]
    cand = [measure.Run(round=i, rate=1.5 * (1.0 + 0.1 * i)) for i in reversed(range(6))]
    d = measure.decide(current, cand)
    assert d.verdict == "confirmed" and d.interval.low == pytest.approx(1.5)


def test_refuted_is_the_mirror_image():
    d = measure.decide(runs([1.0, 1.01, 0.99, 1.0, 1.0, 1.0]),
                       runs([0.38, 0.40, 0.37, 0.39, 0.4, 0.38]))
    assert d.verdict == "refuted"
    assert d.speedup < 1


def test_overlapping_runs_are_inconclusive():
    d = measure.decide(runs([1.0, 1.1, 0.95, 1.0, 1.05, 1.0]),
                       runs([1.05, 1.2, 0.9, 1.15, 1.0, 1.1]))
    assert d.verdict == "inconclusive"
    assert "not clear of" in d.reason


def test_small_gain_below_five_percent_is_inconclusive_even_if_separated():
    d = measure.decide(runs([1.0] * 6), runs([1.03] * 6))
    assert d.verdict == "inconclusive"
    assert "threshold" in d.reason


def test_current_noise_raises_the_threshold():
    current = runs([1.0, 1.2, 1.0, 1.2, 1.0, 1.2])  # 20 % / 17 % from round to round
    d = measure.decide(current, runs([1.2, 1.4, 1.2, 1.4, 1.2, 1.4]))
    assert d.threshold == pytest.approx(1 + d.noise) and d.noise > 0.15
    assert d.verdict == "inconclusive"  # every pair faster, but only 1.17-1.2x
    assert measure.decide(current, runs([1.5, 1.8, 1.5, 1.8, 1.5, 1.8])).verdict == "confirmed"


def test_too_few_pairs_never_give_a_verdict():
    d = measure.decide(runs([1.0] * 2), runs([2.0] * 2))
    assert d.verdict == "inconclusive" and "3 are needed" in d.reason and d.interval is None
    assert measure.decide([], runs([2.0] * 6)).verdict == "inconclusive"


def test_a_large_consistent_gain_is_confirmed_from_few_pairs():
    # The issue's image folder: four pairs, every one at least 1.72x.
    d = measure.decide(runs([1.0, 1.02, 0.98, 1.0]), runs([1.72, 2.2, 1.9, 2.0]))
    assert d.verdict == "confirmed" and d.pairs == 4
    assert d.interval.level == 0.99 and 1.4 < d.interval.low < 1.72 < 2.2 < d.interval.high
    # Three pairs suffice when they agree; with a spread they do not.
    assert measure.decide(runs([1.0] * 3), runs([8.1, 8.7, 8.4])).verdict == "confirmed"
    assert measure.decide(runs([1.0] * 3), runs([1.2, 2.5, 1.4])).verdict == "inconclusive"


def test_t_interval_is_on_the_log_scale():
    iv = measure.t_interval([2.0, 2.0, 2.0])
    assert (iv.low, iv.high) == pytest.approx((2.0, 2.0))
    iv = measure.t_interval([0.5, 2.0, 1.0])  # a 2x loss and a 2x gain cancel
    assert math.sqrt(iv.low * iv.high) == pytest.approx(1.0)
    assert measure.t_interval([1.0, 2.0]) is None
    assert measure.t_quantile(2) == pytest.approx(9.925) and measure.t_quantile(60) == pytest.approx(2.66, abs=0.01)


def test_one_outlying_pair_cannot_carry_a_verdict_past_six_pairs():
    # The mean of the logs clears the threshold, but one pair of seven is
    # below 1: the exact sign test does not confirm the side.
    d = measure.decide(runs([1.0] * 7), runs([1.5, 1.45, 1.55, 1.5, 1.5, 1.48, 0.98]))
    assert d.verdict == "inconclusive" and "sign test" in d.reason


def test_contended_only_when_busy_and_no_interval():
    busy = dict(foreign_share=0.8)
    d = measure.decide(runs([1.0] * 2, **busy), runs([2.0] * 2, **busy))
    assert d.verdict == "contended" and "80%" in d.reason
    d = measure.decide(runs([1.0] * 6, **busy), runs([2.0] * 6, **busy))
    assert d.verdict == "confirmed"  # a busy machine still gives an interval


def test_cross_check_sets_aside_current_runs_slowed_by_other_work():
    # Eight current runs lost half their CPU time per wall second to another
    # process; on the four others the candidate gains 3 % at the median:
    # the interval over all twelve pairs clears 1.05x, the undisturbed
    # pairs do not, so nothing is confirmed.
    cur = [measure.Run(round=i, rate=0.5 if i < 8 else 1.0, utilisation=0.5 if i < 8 else 1.0)
           for i in range(12)]
    cand = runs([1.0] * 8 + [1.0, 1.0, 1.06, 1.06], utilisation=1.0)
    assert measure.decide(runs([r.rate for r in cur]), cand).verdict == "confirmed"
    d = measure.decide(cur, cand)
    assert d.verdict == "inconclusive" and "kept its usual" in d.reason
    # One slowed run among many does not undo a clear gain.
    cur = [measure.Run(round=i, rate=1.0, utilisation=0.5 if i == 3 else 1.0) for i in range(6)]
    assert measure.decide(cur, runs([1.5] * 6, utilisation=1.0)).verdict == "confirmed"


def test_aa_never_decides():
    # The same configuration twice, with round-to-round noise of +-15 %.
    import random

    rng = random.Random(7)
    verdicts = []
    for _ in range(300):
        a = runs([1.0 + rng.uniform(-0.15, 0.15) for _ in range(8)])
        b = runs([1.0 + rng.uniform(-0.15, 0.15) for _ in range(8)])
        verdicts.append(measure.decide(a, b).verdict)
    assert verdicts.count("confirmed") + verdicts.count("refuted") == 0


def test_nw1_on_two_cpus_like_the_issue_is_inconclusive():
    d = measure.decide(runs([1.0, 1.01, 1.0, 0.99, 1.0, 1.0]),
                       runs([0.96, 1.0, 0.98, 0.99, 0.97, 0.98]))
    assert d.verdict == "inconclusive"


def window(**kw):
    base = dict(wall_s=2.0, usable_cpus=2, foreign_busy_s=0.02, our_cpu_s=2.0,
                runq_wait_s=0.05, demand=2)
    base.update(kw)
    return measure.Window(**base)


def test_gate_quiet_machine():
    g = measure.gate(window())
    assert not g.contended
    assert g.foreign_share == pytest.approx(0.005)


def test_gate_second_tenant_busy_on_our_cpus():
    g = measure.gate(window(foreign_busy_s=1.2))  # 30 % of 2 CPUs x 2 s
    assert g.contended
    assert "30%" in g.reason


def test_gate_run_queue_wait_when_we_fit():
    g = measure.gate(window(foreign_busy_s=None, runq_wait_s=1.0))
    assert g.contended
    assert "waited" in g.reason


def test_gate_ignores_self_inflicted_wait_when_oversubscribed():
    # Five processes on two CPUs queue behind each other: not contention.
    g = measure.gate(window(foreign_busy_s=0.05, runq_wait_s=1.5, demand=5))
    assert not g.contended


def test_gate_window_from_shim_dict():
    w = measure.Window.from_dict({"wall_s": 1, "usable_cpus": 2, "foreign_busy_s": None,
                                  "our_cpu_s": 1, "runq_wait_s": 0, "demand": 1})
    assert w.foreign_busy_s is None and not measure.gate(w).contended


def test_protocol_minimums_follow_the_issue():
    p = measure.Protocol()
    assert p.warmup(0, None) == 5
    assert p.warmup(4, 2) == 16
    assert p.measured(0) == 30
    assert p.measured(8) == 80
    assert p.seconds_min == 2.0 and p.repeats == 5


def test_protocol_from_env(monkeypatch):
    monkeypatch.setenv("LOADLINT_VERIFY_MIN_SECONDS", "0.5")
    monkeypatch.setenv("LOADLINT_VERIFY_PER_WORKER", "3")
    p = measure.Protocol.from_env(repeats=3, batches_min=None)
    assert (p.seconds_min, p.per_worker, p.repeats, p.batches_min) == (0.5, 3, 3, 30)


def test_sweep_ceiling_projection():
    assert measure.num_workers_sweep(2) == [0, 1, 2]
    assert measure.num_workers_sweep(6) == [0, 1, 2, 4, 6]
    assert measure.ceiling(2, 4) == 2.0
    assert measure.ceiling(16, 4) == 4.0
    assert measure.project_epoch(1.5, 10.0, 100) == pytest.approx(11.5)
    assert math.isinf(measure.project_epoch(0, 0, 10))
    assert measure.clearly_slower([0.5, 0.6], [1.0, 1.0])
    assert not measure.clearly_slower([0.9], [1.0])


def _run(rate):
    return {"rate": rate, "epochs": [{"start_s": 0.1}, {"start_s": 0.05}], "ttfb_s": 0.1,
            "steady_batches": 50, "steady_s": 1.0, "cpu_s": 1.0, "worker_pss": 1e8,
            "shm_growth": 0, "data_wait_s": 0.5, "window": {}, "gate": {"contended": False}}


def _raw(cur, cand, cand_config=None):
    base = {"num_workers": 0, "prefetch_factor": None, "persistent_workers": False,
            "pin_memory": False, "multiprocessing_context": None, "timeout": 0,
            "in_order": True, "pin_memory_device": ""}
    cfg = dict(base, **(cand_config or {"num_workers": 2, "persistent_workers": True}))
    return {
        "call": {"file": "/x/train.py", "line": 10, "end_line": 12, "len": 100,
                 "iterable": False, "class": "torch.utils.data.dataloader.DataLoader"},
        "preflight": {"usable_cpus": 2, "cuda": False},
        "candidates": [
            {"name": "current", "config": dict(base, prefetch_factor=None),
             "equivalence": {"equivalent": True}, "runs": [_run(r) for r in cur]},
            {"name": "suggested", "config": cfg, "equivalence": {"equivalent": True},
             "runs": [_run(r) for r in cand]},
        ],
    }


def test_report_confirmed_carries_best_for_fix_from_verify():
    rep = report.build_report(_raw([1, 1.01, 0.99, 1, 1, 1], [1.9, 1.95, 1.88, 1.9, 1.9, 1.9]),
                         mode="loader", command=[])
    site = rep["call_sites"][0]
    assert (site["file"], site["line"], site["end_line"]) == ("/x/train.py", 10, 12)
    assert site["verdict"] == "confirmed"
    assert site["best"] == {"num_workers": 2, "persistent_workers": True}
    assert site["changes"] == {"num_workers": 2, "persistent_workers": True}
    assert rep["ceiling"]["text"].startswith("at most 2.0x on 2 usable CPUs")
    assert "no CUDA device" in rep["cuda"]["reason"]
    text = report.render_text(rep)
    assert "CONFIRMED" in text and "runs suggested: 1.9 1.95 1.88 1.9 1.9 1.9" in text
    assert text.splitlines()[1].startswith("answer: num_workers=2, persistent_workers=True is 1.90x")
    low, high = site["decision"]["interval"]
    assert 1.88 / 0.99 - 0.02 < low < 1.9 < high < 1.95 / 1.01 + 0.02
    assert site["decision"]["favoured"] == 6 and site["decision"]["method"].startswith("t-interval")


def test_report_refuted_keeps_current_as_best():
    rep = report.build_report(_raw([1, 1.01, 0.99, 1, 1, 1], [0.38, 0.4, 0.37, 0.4, 0.4, 0.4]),
                         mode="loader", command=[])
    site = rep["call_sites"][0]
    assert site["verdict"] == "refuted"
    assert site["best"] == {} and site["changes"] == {}


def test_report_contended_is_never_a_verdict():
    raw = _raw([1.0, 1.0], [0.9, 1.1])
    for c in raw["candidates"]:
        for r in c["runs"]:
            r["gate"] = {"contended": True, "foreign_share": 0.9, "reason": "busy"}
    site = report.build_report(raw, mode="loader", command=[])["call_sites"][0]
    assert site["verdict"] == "contended" and "90%" in site["reason"]
    assert site["best"] == {}


def test_report_rejected_candidate_is_a_correctness_finding():
    raw = _raw([1, 1, 1], [2, 2, 2])
    raw["candidates"][1]["equivalence"] = {"equivalent": False, "how": "512 samples instead of 256"}
    site = report.build_report(raw, mode="loader", command=[])["call_sites"][0]
    assert site["candidates"][1]["decision"]["verdict"] == "rejected"
    assert site["verdict"] == "inconclusive"
    assert "changes the data" in site["findings"][0]


def test_report_removed_keywords():
    raw = _raw([1] * 6, [3] * 6, {"num_workers": 0})
    raw["candidates"][0]["config"].update(num_workers=2, prefetch_factor=4)
    site = report.build_report(raw, mode="loader", command=[])["call_sites"][0]
    assert site["verdict"] == "confirmed"
    assert site["best"] == {}
    assert sorted(site["removed"]) == ["num_workers", "prefetch_factor"]


def _rank(rank, epochs, **kw):
    base = {"rank": rank, "epochs": [{"indices": e} for e in epochs], "set_epoch": [],
            "sampler": "DistributedSampler", "distributed_sampler": True, "shuffle": True,
            "padded": 0, "dataset_len": 8}
    base.update(kw)
    return base


def test_ddp_compare_pass():
    r0 = _rank(0, [[0, 2, 4, 6], [6, 4, 2, 0]], set_epoch=[{"epoch": 0}, {"epoch": 1}])
    r1 = _rank(1, [[1, 3, 5, 7], [7, 1, 5, 3]])
    v = ddp.compare([r0, r1])
    assert v["verdict"] == "pass", v


def test_ddp_compare_overlap_and_same_order():
    r0 = _rank(0, [list(range(8))] * 3, sampler="RandomSampler", distributed_sampler=False)
    r1 = _rank(1, [list(range(8))] * 3, sampler="RandomSampler", distributed_sampler=False)
    v = ddp.compare([r0, r1])
    by = {c["name"]: c for c in v["checks"]}
    assert by["ranks overlap"]["status"] == "FAIL"
    assert "share 8 of 8" in by["ranks overlap"]["evidence"]
    assert by["order per epoch"]["status"] == "FAIL"


def test_ddp_compare_coverage_gap():
    v = ddp.compare([_rank(0, [[0, 1]]), _rank(1, [[2, 3]])])
    by = {c["name"]: c for c in v["checks"]}
    assert by["coverage"]["status"] == "FAIL"
    assert "4 of 8" in by["coverage"]["evidence"]


def test_ddp_padding_is_not_overlap():
    v = ddp.compare([_rank(0, [[0, 2, 4]], padded=1, dataset_len=5),
                     _rank(1, [[1, 3, 0]], padded=1, dataset_len=5)])
    assert v["verdict"] == "pass", v


# -- the answer's wording (issue: verify answers that never contradict themselves)


def _site_of(cur, cand, **gate):
    raw = _raw(cur, cand)
    if gate:
        for c in raw["candidates"]:
            for r in c["runs"]:
                r["gate"] = gate
    return report.build_report(raw, mode="loader", command=[])


def test_answer_says_unconfirmed_when_every_pair_favours_the_candidate():
    # Two pairs, both 1.9x: no interval yet, but never "keep the call as written".
    rep = _site_of([1.0, 1.0], [1.9, 1.95])
    answer = report.render_text(rep).splitlines()[1]
    assert answer == ("answer: num_workers=2, persistent_workers=True measured 1.92x faster in all 2 "
                      "pairs, UNCONFIRMED (2 pairs: too few for an interval); confirm with a larger "
                      "--budget or on a quieter machine")


def test_answer_when_contended_is_one_voice():
    rep = _site_of([1.0, 1.0], [0.9, 1.1], contended=True, foreign_share=0.9, reason="busy")
    answer = report.render_text(rep).splitlines()[1]
    assert answer == ("answer: none: the machine was too busy with other work to compare (best "
                      "other measured 1.00x over 2 pairs); rerun on a quieter machine or with a "
                      "larger --budget")
    assert "keep the call" not in report.render_text(rep)


def test_answer_keeps_the_call_when_the_alternatives_measured_slower():
    rep = _site_of([1, 1.01, 0.99, 1, 1, 1], [0.38, 0.4, 0.37, 0.4, 0.4, 0.4])
    assert report.render_text(rep).splitlines()[1].startswith(
        "answer: keep the call as written: every alternative measured slower (best other: 0.40x; 99% interval")


def test_apply_with_names_the_report_written_with_o():
    rep = _site_of([1, 1.01, 0.99, 1, 1, 1], [1.9, 1.95, 1.88, 1.9, 1.9, 1.9])
    assert "  apply with: loadlint fix --from-verify out.json" in report.render_text(rep, output="out.json")
    assert "(write the report with -o REPORT.json)" in report.render_text(rep)


def test_the_table_fits_the_terminal_unless_wide():
    rep = _site_of([1, 1.01, 0.99, 1, 1, 1], [1.9, 1.95, 1.88, 1.9, 1.9, 1.9])
    narrow = report.render_text(rep, width=80)
    assert max(len(line) for line in narrow.splitlines()) <= 80
    assert "    num_workers=2, persistent_workers=True" in narrow.splitlines()
    wide = report.render_text(rep, wide=True)
    assert max(len(line) for line in wide.splitlines()) > 120 and "PSS wrk" in wide


def test_exit_status_for_ci():
    from loadlint.verify.command import exit_status

    assert exit_status(_site_of([1, 1.01, 0.99, 1, 1, 1], [1.9, 1.95, 1.88, 1.9, 1.9, 1.9])) == 0
    assert exit_status(_site_of([1, 1.01, 0.99, 1, 1, 1], [0.38, 0.4, 0.37, 0.4, 0.4, 0.4])) == 1
    assert exit_status(_site_of([1.0, 1.0], [0.9, 1.1], contended=True, foreign_share=0.9,
                                reason="busy")) == 1
    assert exit_status({"mode": "ddp", "distributed": {"verdict": "fail"}}) == 1
    assert exit_status({"mode": "ddp", "distributed": {"verdict": "pass"}}) == 0


def test_the_static_pre_check_is_under_the_watchdog(capsys):
    import time as _time

    from loadlint.verify.command import _within

    def blocked(path):
        _time.sleep(30)  # a read of a FIFO named *.py never returns
        return [1]

    t0 = _time.monotonic()
    assert _within(blocked, "x.py", 0.2) is None
    assert _time.monotonic() - t0 < 5
    assert capsys.readouterr().err == ("loadlint verify: note: the static pre-check of x.py did not "
                                       "finish within 0.2 s; measuring the first loader built\n")
    assert _within(lambda p: [3, 7], "x.py", 5) == [3, 7]
