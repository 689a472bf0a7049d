"""The run loop: a pool and a sequential run give the same report in the same
order, the pre-filter keeps files away from the engine, a dead worker loses
no file, and progress never reaches machine-readable output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import loadlint.frontends.checking as checking
import loadlint.run.pool as pool
import loadlint.run.runner as runner
from loadlint.api import FixRequest, ProfileCache
from loadlint.frontends.cli import cli
from loadlint.workspace.config import Settings
from loadlint.workspace.discover import Candidate
from loadlint.types import HardwareProfile, Target

TEMPLATE = """import torch
from torch.utils.data import DataLoader, DistributedSampler


def make_{i}(ds):
    sampler = DistributedSampler(ds) if {i} % 3 == 0 else None
    return DataLoader(ds, batch_size={batch}, sampler=sampler{extra})


for batch in make_{i}(None):
    batch.to("cuda")
"""


def write_tree(root: Path, count: int = 14) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        extra = ", num_workers=0" if i % 2 else ""
        (root / f"mod_{i:02d}.py").write_text(TEMPLATE.format(i=i, batch=8 * (i + 1), extra=extra))
    (root / "pkg").mkdir(exist_ok=True)
    (root / "pkg" / "deep.py").write_text(TEMPLATE.format(i=99, batch=4, extra=""))
    for i in range(5):
        (root / f"plain_{i}.py").write_text(f"VALUE = {i}\n")
    (root / "broken.py").write_text("from torch.utils.data import DataLoader\nDataLoader(ds,\n")
    return root


def profiles() -> ProfileCache:
    cache = ProfileCache()
    cache._profiles[Target()] = HardwareProfile(usable_cpus=8, logical_cpus=8, gpu_count=2)
    return cache


def candidates(root: Path, reverse: bool = False) -> list[Candidate]:
    settings = Settings(root=str(root))
    paths = sorted(root.rglob("*.py"), reverse=reverse)
    return [Candidate(p, settings, False) for p in paths]


def report(run) -> list[tuple]:
    return [
        (r.path, r.error, [(f.code, f.location, f.end_location, f.message, f.fix) for f in r.findings])
        for r in run.results
    ]


def test_pool_and_sequential_give_identical_results(tmp_path):
    root = write_tree(tmp_path / "tree")
    sequential = runner.lint_candidates(candidates(root), jobs=1, profiles=profiles())
    pooled = runner.lint_candidates(candidates(root), jobs=2, profiles=profiles(), pool_min_saving=0)
    assert report(sequential) == report(pooled)
    # The report quotes the lines of a file checked in a worker too.
    assert [r.source.text if r.source else None for r in sequential.results] == [
        r.source.text if r.source else None for r in pooled.results
    ]
    assert any(r.source is not None for r in pooled.results)
    assert sequential.files == pooled.files == 21
    assert sequential.parsed == pooled.parsed == 16  # the five plain files never reach the engine
    codes = {f.code for f in sequential.findings}
    assert {"LL201", "LL900"} <= codes


def test_pool_is_really_used(tmp_path, monkeypatch):
    root = write_tree(tmp_path / "tree")
    real = pool.lint_one

    def tagged(candidate, data, profiles, request):
        result, consulted = real(candidate, data, profiles, request)
        result.__dict__["pid"] = os.getpid()
        return result, consulted

    monkeypatch.setattr(pool, "lint_one", tagged)
    run = runner.lint_candidates(candidates(root), jobs=2, profiles=profiles(), pool_min_saving=0)
    pids = [r.__dict__.get("pid") for r in run.results]
    # Every file that reached the engine (all but the five plain ones) was
    # checked once, none lost: by this process and one worker (two jobs),
    # each with a share.
    assert len(pids) == run.parsed == 16
    assert None not in pids
    assert os.getpid() in pids
    assert len(set(pids)) == 2


def test_order_is_deterministic_whatever_the_discovery_order(tmp_path):
    root = write_tree(tmp_path / "tree")
    forward = runner.lint_candidates(candidates(root), jobs=2, profiles=profiles(), pool_min_saving=0)
    backward = runner.lint_candidates(candidates(root, reverse=True), jobs=2, profiles=profiles(), pool_min_saving=0)
    again = runner.lint_candidates(candidates(root), jobs=2, profiles=profiles(), pool_min_saving=0)
    assert report(forward) == report(backward) == report(again)
    paths = [r.path for r in forward.results]
    assert paths == sorted(paths)
    for result in forward.results:
        rows = [(f.location.row, f.location.column, f.code) for f in result.findings]
        assert rows == sorted(rows)


def test_small_runs_stay_in_process(tmp_path, monkeypatch):
    root = write_tree(tmp_path / "tree", count=2)

    def no_pool(*args, **kwargs):
        raise AssertionError("a pool was started for a handful of small files")

    import concurrent.futures

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", no_pool)
    run = runner.lint_candidates(candidates(root), jobs=2, profiles=profiles())
    assert run.findings


def test_pays_for_pool():
    def work(*sizes):
        return [pool.Work(i, None, b"x" * size) for i, size in enumerate(sizes)]  # type: ignore[arg-type]

    assert not pool._pays_for_pool(work(10_000, 10_000), 2, pool.POOL_MIN_SAVING)
    assert pool._pays_for_pool(work(*[40_000] * 10), 2, pool.POOL_MIN_SAVING)
    # One huge file and crumbs: the huge file alone sets the time.
    assert not pool._pays_for_pool(work(2_000_000, 1_000), 2, pool.POOL_MIN_SAVING)
    assert not pool._pays_for_pool(work(*[40_000] * 10), 1, pool.POOL_MIN_SAVING)


def _die_on_mod_03(candidate, data):
    if candidate.path.name == "mod_03.py":
        os._exit(3)
    return pool._worker_lint(candidate, data)


def test_a_dead_worker_loses_no_file(tmp_path, monkeypatch):
    root = write_tree(tmp_path / "tree")
    expected = runner.lint_candidates(candidates(root), jobs=1, profiles=profiles())
    monkeypatch.setattr(pool, "_worker_lint", pool._work_in_worker, raising=False)
    monkeypatch.setattr(pool, "_work_in_worker", _die_on_mod_03)
    run = runner.lint_candidates(candidates(root), jobs=2, profiles=profiles(), pool_min_saving=0)
    assert report(run) == report(expected)


def test_profile_is_resolved_once_in_the_parent(tmp_path, monkeypatch):
    from loadlint.hardware import detect

    root = write_tree(tmp_path / "tree")
    calls = []
    resolve = detect.rules_profile

    def counting(target=None):
        calls.append(os.getpid())
        return resolve(target)

    monkeypatch.setattr(detect, "rules_profile", counting)
    runner.lint_candidates(candidates(root), jobs=2, profiles=ProfileCache(), pool_min_saving=0)
    assert calls == [os.getpid()]


def test_unreadable_file_is_reported(tmp_path):
    root = write_tree(tmp_path / "tree", count=1)
    missing = Candidate(root / "gone.py", Settings(root=str(root)), True)
    run = runner.lint_candidates([missing, *candidates(root)], jobs=1, profiles=profiles())
    assert [f.code for f in run.findings if f.path.endswith("gone.py")] == ["LL901"]


def test_fix_through_the_pool_matches_sequential(tmp_path):
    one = write_tree(tmp_path / "one")
    two = write_tree(tmp_path / "two")
    request = FixRequest(unsafe=False)
    runner.lint_candidates(candidates(one), request, jobs=1, profiles=profiles())
    runner.lint_candidates(candidates(two), request, jobs=2, profiles=profiles(), pool_min_saving=0)
    for path in sorted(one.rglob("*.py")):
        assert path.read_text() == (two / path.relative_to(one)).read_text(), path.name
    assert "num_workers=" in (one / "mod_00.py").read_text()


# -- progress --------------------------------------------------------------


def _invoke(args, cwd: Path, monkeypatch, tty: bool):
    monkeypatch.setattr(checking, "_is_tty", lambda stream: tty)
    monkeypatch.setattr(runner.Progress, "DELAY", 0.0)
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, args, env={"LOADLINT_OUTPUT_FORMAT": None}, catch_exceptions=False)
    finally:
        os.chdir(old)


BASE = ["check", "--no-cache", "--target", "cpus=4,gpus=1", "-j", "1"]


def test_progress_on_a_terminal_for_human_output(tmp_path, monkeypatch):
    write_tree(tmp_path / "tree")
    result = _invoke([*BASE, "tree"], tmp_path, monkeypatch, tty=True)
    assert "Checking 16/16 files" in result.stderr
    assert "\r\x1b[K" in result.stderr  # erased before the report
    assert "Checking" not in result.stdout


@pytest.mark.parametrize("fmt", ["json", "json-lines", "sarif", "github", "gitlab", "junit", "pylint"])
def test_no_progress_for_machine_readable_output(tmp_path, monkeypatch, fmt):
    write_tree(tmp_path / "tree")
    result = _invoke([*BASE, "--output-format", fmt, "tree"], tmp_path, monkeypatch, tty=True)
    assert "Checking" not in result.stderr and "Checking" not in result.stdout
    if fmt == "json":
        assert json.loads(result.stdout)


def test_no_progress_when_stderr_is_not_a_terminal(tmp_path, monkeypatch):
    write_tree(tmp_path / "tree")
    result = _invoke([*BASE, "tree"], tmp_path, monkeypatch, tty=False)
    assert "Checking" not in result.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_json_on_a_real_terminal_has_no_progress(tmp_path):
    """End to end: stderr really is a terminal, stdout a pipe."""
    import pty

    write_tree(tmp_path / "tree", count=40)
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "loadlint", "check", "--no-cache", "--target", "cpus=4,gpus=1",
             "--output-format", "json", "tree"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=follower, timeout=120,
            env={k: v for k, v in os.environ.items() if k != "LOADLINT_OUTPUT_FORMAT"},
        )
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        if follower != -1:
            os.close(follower)
        os.close(leader)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)
    assert b"Checking" not in b"".join(chunks)


def test_large_files_are_not_parsed_side_by_side(tmp_path, monkeypatch):
    """The pool keeps the bytes being parsed within a budget (memory grows
    with the source size), so two large files never overlap."""
    import time

    root = tmp_path / "tree"
    root.mkdir()
    padding = "# " + "x" * 78 + "\n"
    for i in range(4):
        (root / f"big_{i}.py").write_text(TEMPLATE.format(i=i, batch=8, extra="") + padding * 500)  # ~40 KB
    for i in range(6):
        (root / f"small_{i}.py").write_text(TEMPLATE.format(i=i, batch=8, extra=""))
    real = pool.lint_one

    def timed(candidate, data, profiles, request):
        start = time.monotonic()
        result, consulted = real(candidate, data, profiles, request)
        time.sleep(0.05)  # long enough that an overlap could not go unseen
        result.__dict__["span"] = (start, time.monotonic())
        return result, consulted

    monkeypatch.setattr(pool, "lint_one", timed)
    monkeypatch.setattr(pool, "IN_FLIGHT_BYTES", 50_000)
    run = runner.lint_candidates(candidates(root), jobs=2, profiles=profiles(), pool_min_saving=0)
    spans = sorted(r.__dict__["span"] for r in run.results if Path(r.path).name.startswith("big_"))
    assert len(spans) == 4
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end
    # The small files still ran beside the big ones.
    assert len(run.results) == 10


def test_fewer_collections_restores_the_callers_pace():
    import gc

    from loadlint.run.runner import fewer_collections

    before = gc.get_threshold()
    with fewer_collections():
        assert gc.get_threshold()[0] == 50_000
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError
    assert gc.get_threshold() == before


#: Its one finding's fix is unsafe: a safe fix leaves the file as it is.
SETTLED = """import torch
from torch.utils.data import DataLoader, IterableDataset


class Stream(IterableDataset):
    def __iter__(self):
        yield from range(8)


def make():
    return DataLoader(Stream(), batch_size=4, pin_memory=True)


for batch in make():
    batch.to("cuda", non_blocking=True)
"""
UNFIXED = TEMPLATE.format(i=1, batch=8, extra="")


def test_a_writing_fix_reads_a_file_with_nothing_to_fix_once(tmp_path, monkeypatch):
    import loadlint.engine.pipeline as pipeline
    import loadlint.project.join as join

    root = tmp_path / "proj"
    root.mkdir()
    (root / "settled.py").write_text(SETTLED)
    (root / "train.py").write_text(UNFIXED)
    parsed: list[tuple[str, bool]] = []
    summarised: list[str] = []
    check_bytes, summarise_text = pipeline.check_bytes, join.summarise_text

    def counted_check(data, path, options, fix=None, **kwargs):
        parsed.append((Path(path).name, fix is not None))
        return check_bytes(data, path, options, fix, **kwargs)

    def counted_summary(text):
        summarised.append(text)
        return summarise_text(text)

    monkeypatch.setattr(pipeline, "check_bytes", counted_check)
    monkeypatch.setattr(join, "summarise_text", counted_summary)
    run = runner.lint_candidates(candidates(root), FixRequest(unsafe=False), jobs=1, profiles=profiles())
    # The check pass reads both files; the fix pass only the one with a fix to apply;
    # the project phase parses neither: the check pass and the fix made their summaries.
    assert parsed == [("settled.py", False), ("train.py", False), ("train.py", True)]
    assert summarised == []
    assert (root / "settled.py").read_text() == SETTLED and "num_workers=" in (root / "train.py").read_text()
    # What the fix reports is what a check right after it says.
    monkeypatch.undo()
    after = runner.lint_candidates(candidates(root), None, jobs=1, profiles=profiles())
    assert [r for r in report(run) if r[2]] == report(after)
    assert [(Path(path).name, [code for code, *_ in found]) for path, _, found in report(after)] == [("settled.py", ["LL201"])]
