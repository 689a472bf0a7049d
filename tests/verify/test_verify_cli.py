"""End to end: `loadlint verify` on fixture scripts, in a subprocess, as a
user would run it. Minimum durations are shrunk through the environment
(see FAST_ENV in conftest.py); the machine is only 2 CPUs, so verdicts that
depend on speed skip when the contention gate saw other work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

pytest.importorskip("torch", reason="loadlint verify needs torch")
pytestmark = pytest.mark.torch

#: For tests of the report's fields rather than its verdict: keep runs even
#: when other work shares the machine (the report then says so).
PLUMBING = {"LOADLINT_VERIFY_GATE_SCALE": "1000"}


def _marked(mark: str) -> list[int]:
    """Live processes whose environment carries ``mark``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if mark.encode() not in fh.read():
                    continue
            with open(f"/proc/{entry}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                    continue
        except OSError:
            continue
        found.append(int(entry))
    return found


def test_crash_before_loader_is_one_line_and_exit_2(vf):
    proc = vf.run(vf.fixture("crash_before.py"))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("loadlint verify: error: crash_before.py crashed before building its DataLoader")
    assert "KeyError: 'batchsize'" in last and "crash_before.py:8" in last
    assert proc.stdout == ""


def test_no_loader_exit_2(vf):
    proc = vf.run(vf.fixture("no_loader.py"))
    assert proc.returncode == 2
    assert "finished without building a DataLoader" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_announces_before_running(vf):
    proc = vf.run(vf.fixture("no_loader.py"), "--", "--flag", "x y")
    first = proc.stderr.splitlines()[0]
    assert first.startswith("loadlint verify: will execute python ")
    assert "no_loader.py --flag 'x y'" in first


def test_usage_errors_exit_2(vf):
    assert vf.run().returncode == 2
    proc = vf.run(vf.fixture("no_loader.py"), "--at", "nonsense")
    assert proc.returncode == 2 and "FILE:LINE" in proc.stderr
    proc = vf.run(vf.fixture("no_loader.py"), "--try", "bogus=1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_hang_times_out_and_leaves_no_orphans(vf):
    mark = f"VERIFY_TEST_MARK_{uuid.uuid4().hex}"
    start = time.monotonic()
    proc = vf.run(vf.fixture("hang_before.py"), "--timeout", "4", env={mark: "1"})
    assert proc.returncode == 2
    assert "did not build a DataLoader within 4 s" in proc.stderr
    assert time.monotonic() - start < 60
    assert _marked(mark) == [], "processes started by the script survived"


def test_ctrl_c_stops_everything(vf):
    mark = f"VERIFY_TEST_MARK_{uuid.uuid4().hex}"
    env = {**os.environ, **vf.FAST_ENV, mark: "1"}
    env["PYTHONPATH"] = str(vf.REPO)
    # SIG_DFL: a test run started in the background inherits SIGINT ignored, and Ctrl-C would do nothing.
    proc = subprocess.Popen([sys.executable, "-c", vf.ENTRY, vf.fixture("hang_before.py")], cwd=vf.REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(_marked(mark)) < 4:
        time.sleep(0.2)  # the CLI, the script and its two helpers
    assert len(_marked(mark)) >= 4
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "interrupted" in err and "Traceback" not in err
    assert _marked(mark) == []


def test_io_bound_four_workers_confirmed(vf):
    _, rep = vf.json(vf.fixture("io_bound.py"), "--no-tune", "--repeats", "6", "--try",
                     "num_workers=4", "--", "1.5")
    vf.skip_if_contended(rep)
    site = rep["call_sites"][0]
    assert site["verdict"] == "confirmed", site["reason"]
    assert site["winner"] == "try"
    assert site["best"] == {"num_workers": 4}
    assert site["speedup"] > 2.0  # beyond the 2-CPU ceiling: the work is waiting, not computing
    assert rep["ceiling"]["text"].startswith("at most 2.0x on 2 usable CPUs")
    assert (site["file"].endswith("io_bound.py"), site["line"], site["end_line"]) == (True, 26, 26)
    cands = {c["name"]: c for c in site["candidates"]}
    assert cands["try"]["n"] >= 6 and cands["current"]["n"] >= 6
    assert cands["try"]["median_worker_pss"] > 0
    assert rep["cuda"] == {"measured": False,
                           "reason": "no CUDA device: host-to-device copy not measured"}


def test_cpu_bound_text_report(tmp_path, vf):
    out = tmp_path / "report.json"
    plot = tmp_path / "plot.png"
    proc = vf.run(vf.fixture("cpu_bound.py"), "--no-tune", "--repeats", "3", "--try",
                  "num_workers=2,persistent_workers=True", "-o", str(out), "--plot", str(plot),
                  "--", "--items", "1024", "--work", "2000", env=PLUMBING)
    assert proc.returncode in (0, 1), proc.stderr
    text = proc.stdout
    assert "ceiling: at most 2.0x on 2 usable CPUs" in text
    assert "verdict:" in text and "runs current:" in text and "runs try:" in text
    assert "no CUDA device: host-to-device copy not measured" in text
    rep = json.loads(out.read_text())
    assert rep["call_sites"][0]["verdict"] in ("confirmed", "inconclusive", "refuted", "contended")
    # Exit 1 only for an answer CI should see (the suggestion slower, or no answer).
    assert proc.returncode == (1 if rep["call_sites"][0]["verdict"] in ("refuted", "contended") else 0)
    assert plot.stat().st_size > 1000


def test_non_worker_aware_iterable_rejected(vf):
    _, rep = vf.json(vf.fixture("iterable_naive.py"), "--repeats", "1", "--try", "num_workers=2")
    site = rep["call_sites"][0]
    cands = {c["name"]: c for c in site["candidates"]}
    assert cands["try"]["equivalence"]["equivalent"] is False
    assert cands["try"]["decision"]["verdict"] == "rejected"
    assert "duplicated" in cands["try"]["equivalence"]["how"]
    assert any("changes the data" in f for f in site["findings"])
    assert site["winner"] != "try"
    # The default search meets the same duplicates and says so too.
    assert any(p["name"] == "nw=2" and not p["equivalent"] for p in site["sweep"])
    assert any(f.startswith("nw=2 ") and "duplicated" in f for f in site["findings"])


def test_worker_aware_iterable_accepted(vf):
    _, rep = vf.json(vf.fixture("iterable_aware.py"), "--no-tune", "--repeats", "1", "--try",
                     "num_workers=2,persistent_workers=True")
    cands = {c["name"]: c for c in rep["call_sites"][0]["candidates"]}
    assert cands["try"]["equivalence"]["equivalent"] is True


def test_spawn_dataset_in_main(vf):
    # The suggestion turns workers on; under spawn they must unpickle
    # __main__.Squares, which only works if __main__ is the script.
    _, rep = vf.json(vf.fixture("spawn_main.py"), "--no-tune", "--repeats", "1")
    assert rep["machine"]["start_method"] == "spawn"
    cands = {c["name"]: c for c in rep["call_sites"][0]["candidates"]}
    sug = cands["suggested"]
    assert sug["config"]["num_workers"] >= 1
    assert sug["error"] is None, sug["error"]
    assert sug["equivalence"]["equivalent"] is True
    assert sug["n"] >= 1 or sug["contended_runs"] >= 1


def test_three_loaders_at_picks_the_second(vf):
    path = vf.fixture("three_loaders.py")
    _, rep = vf.json(path, "--at", f"{path}:11", "--no-tune", "--repeats", "1")
    site = rep["call_sites"][0]
    assert (site["line"], site["end_line"], site["batch_size"]) == (9, 12, 64)


def test_three_loaders_default_is_first_built(vf):
    _, rep = vf.json(vf.fixture("three_loaders.py"), "--no-tune", "--repeats", "1")
    assert rep["call_sites"][0]["line"] == 8


def test_at_without_loader_there(vf):
    path = vf.fixture("three_loaders.py")
    proc = vf.run(path, "--at", f"{path}:3")
    assert proc.returncode == 2
    assert "no DataLoader was built at" in proc.stderr and "three_loaders.py:8" in proc.stderr


def test_entry_returning_dataset_and_step_mode(vf):
    _, rep = vf.json("--entry", "entry_mod:dataset", "--no-tune", "--repeats", "3", "--step-ms", "1",
                      cwd=vf.REPO / "tests" / "verify" / "fixtures", env=PLUMBING)
    assert rep["mode"] == "step"
    assert any("returned a Dataset" in n for n in rep["notes"])
    assert any("gate was relaxed" in n for n in rep["notes"])
    site = rep["call_sites"][0]
    assert site["candidates"][0]["data_wait_share"] is not None


def test_in_situ(tmp_path, vf):
    _, rep = vf.json(vf.fixture("cpu_bound.py"), "--in-situ", "--repeats", "3", "--steps", "8",
                      "--", "--items", "512", "--work", "1000", env=PLUMBING)
    assert rep["mode"] == "in-situ"
    site = rep["call_sites"][0]
    assert site["rate_unit"] == "steps/s"
    cur = site["candidates"][0]
    assert cur["n"] == 3
    run = cur["runs"][0]
    assert run["steps"] == 8 and 0 <= run["blocked_share"] <= 1
    assert site["candidates"][1]["n"] == 3
    assert rep["gpu"]["sampled"] is False and "no NVIDIA GPU" in rep["gpu"]["reason"]


@pytest.mark.parametrize("script, verdict, failing", [
    ("ddp_good.py", "pass", []),
    ("ddp_no_sampler.py", "fail", ["ranks overlap"]),
    ("ddp_no_set_epoch.py", "fail", ["order per epoch"]),
])
def test_nproc_2(script, verdict, failing, vf):
    proc, rep = vf.json("--nproc", "2", vf.fixture(script))
    d = rep["distributed"]
    assert d["verdict"] == verdict, d["checks"]
    assert proc.returncode == (1 if verdict == "fail" else 0)  # a FAIL is visible to CI
    assert [c["name"] for c in d["checks"] if c["status"] == "FAIL"] == failing
    assert not d["simulated"]
    assert rep["call_sites"] == []


def test_nproc_falls_back_to_simulation_without_cuda(vf):
    _, rep = vf.json("--nproc", "2", vf.fixture("ddp_needs_cuda.py"))
    d = rep["distributed"]
    assert d["simulated"] is True
    assert "CUDA" in d["simulated_reason"]
    by = {c["name"]: c["status"] for c in d["checks"]}
    assert by["ranks overlap"] == "PASS"


def test_import_does_not_load_torch(vf):
    code = "import sys, loadlint.verify.command; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=vf.REPO, capture_output=True, text=True)
    assert out.stdout.strip() == "False"


def test_tune_sweeps_and_keeps_finalists(vf):
    _, rep = vf.json(vf.fixture("io_bound.py"), "--tune", "--repeats", "3", "--", "1",
                     env=PLUMBING)
    site = rep["call_sites"][0]
    names = [p["name"] for p in site["sweep"]]
    # The loader waits, so the sweep goes past the 2 CPUs (memory permitting).
    assert {"nw=1", "nw=2", "nw=4", "nw=8", "nw=16"} <= set(names)
    assert site["search"]["max_workers"] > 8 and site["search"]["mode"] == "sweep"
    # persistent_workers x prefetch_factor on the two best worker counts
    # (pw=0,pf=2 is the worker count's own point: prefetch_factor 2 is the default).
    ranked = sorted((p for p in site["sweep"] if p["name"].count("=") == 1 and p["rate"]),
                    key=lambda p: -p["rate"])
    for p in ranked[:2]:
        assert {f"{p['name']},pw={w},pf={f}" for w, f in ((0, 4), (1, 2), (1, 4))} <= set(names)
    finalists = [c for c in site["candidates"] if c["name"].startswith("tuned")]
    assert finalists and all(c["n"] == 3 for c in finalists)
    assert site["verdict"] in ("confirmed", "inconclusive", "refuted")


# -- the default run: adaptive search, paired rounds --------------------------


def test_default_run_searches_past_the_cpus_for_a_waiting_loader(vf):
    _, rep = vf.json(vf.fixture("io_bound.py"), "--budget", "60", "--repeats", "6", "--", "1.5")
    site = rep["call_sites"][0]
    assert site["search"]["mode"] == "search" and site["search"]["max_workers"] > 8
    assert "waits" in site["search"]["reason"]
    # High first: 8 workers (4x the CPUs) is the first point, then doubling.
    points = [p["name"] for p in site["sweep"] if p["name"].startswith("nw=")]
    assert points[:2] == ["nw=8", "nw=16"], points
    # One run of the call as written per round of points, not one per point.
    assert site["search"]["reference_runs"] < site["search"]["points"]
    names = [c["name"] for c in site["candidates"]]
    assert names[0] == "current" and "tuned1" in names
    vf.skip_if_contended(rep)
    assert site["verdict"] == "confirmed", site["reason"]
    assert site["best"]["num_workers"] > 2  # past the 2 CPUs: the work is waiting
    assert site["speedup"] > 2.0
    d = site["decision"]
    assert d["pairs"] >= 3 and d["interval"][0] > 1.05 and d["method"].startswith("t-interval")


def test_no_tune_compares_the_call_and_the_suggestion(vf):
    _, rep = vf.json(vf.fixture("io_bound.py"), "--no-tune", "--repeats", "1", "--", "1")
    site = rep["call_sites"][0]
    assert [c["name"] for c in site["candidates"]] == ["current", "suggested"]
    assert "sweep" not in site and "search" not in site


def test_budget_is_validated(vf):
    proc = vf.run(vf.fixture("io_bound.py"), "--budget", "0.5")
    assert proc.returncode == 2 and "--budget" in proc.stderr


def _burner() -> subprocess.Popen[bytes]:
    """A process that keeps one of our CPUs busy (the last one we may use)."""
    cpu = max(os.sched_getaffinity(0))
    code = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True:\n    pass\n"
    return subprocess.Popen([sys.executable, "-c", code])


@pytest.mark.parametrize("load", [False, True], ids=["quiet", "burner"])
@pytest.mark.parametrize("script, args", [("io_bound.py", ["1"]),
                                          ("cpu_bound.py", ["--items", "256", "--work", "800"])],
                         ids=["io", "cpu"])
def test_aa_is_never_confirmed_or_refuted(script, args, load, vf):
    burner = _burner() if load else None
    try:
        _, rep = vf.json(vf.fixture(script), "--aa", "--repeats", "6", "--", *args)
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()
    site = rep["call_sites"][0]
    assert [c["name"] for c in site["candidates"]] == ["current", "again"]
    assert site["verdict"] in ("inconclusive", "contended"), site["reason"]


def test_io_bound_confirmed_under_background_load(vf):
    burner = _burner()
    try:
        _, rep = vf.json(vf.fixture("io_bound.py"), "--no-tune", "--repeats", "6", "--try",
                         "num_workers=4", "--", "1.5")
    finally:
        burner.kill()
        burner.wait()
    site = rep["call_sites"][0]
    assert site["verdict"] == "confirmed", site["reason"]
    assert site["winner"] == "try" and site["best"] == {"num_workers": 4}


def test_progress_line_only_on_a_terminal(vf):
    proc = vf.run(vf.fixture("io_bound.py"), "--no-tune", "--repeats", "1", "--", "1")
    assert proc.returncode in (0, 1) and "\r" not in proc.stderr  # piped: no live line
    proc = vf.run("--output-format", "json", vf.fixture("io_bound.py"), "--no-tune",
                  "--repeats", "1", "--", "1")
    assert "\r" not in proc.stderr and "\r" not in proc.stdout
