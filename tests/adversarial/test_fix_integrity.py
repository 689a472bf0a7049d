"""A fix lands whole or not at all.

* Kill test: ``loadlint fix`` over 200 files, SIGKILLed at random moments,
  many times; every file is always byte-identical to its original or to a
  version one of the fix's rounds writes whole (a fix run applies the
  project's fixes in rounds: pinning, then the transfers it makes possible),
  and a following run leaves no temporary file.
* Two fixes on one tree at once; a file changed between read and write.

``LOADLINT_KILL_RUNS`` sets the number of killed runs (the ``fuzz_long``
run uses many more).
"""

from __future__ import annotations

import codecs
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loadlint.sources.files import FileChanged, write_atomic
from loadlint.engine.pipeline import fix_bytes
from loadlint.types import Options, Target
from loadlint.rules import CODES

FIXTURES = Path(__file__).parent / "fixtures"
TARGET = "cpus=4,gpus=1"
TEMP_SUFFIX = ".loadlint-tmp"
KILL_RUNS = int(os.environ.get("LOADLINT_KILL_RUNS", "30"))


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("LOADLINT_")}
    out["PYTHONDONTWRITEBYTECODE"] = "1"
    return out


def fix_command(tree: Path, cache: Path) -> list[str]:
    return [sys.executable, "-m", "loadlint", "fix", "--target", TARGET, "--cache-dir", str(cache), "-q", str(tree)]


def make_originals(count: int = 200) -> dict[str, bytes]:
    """Files that all differ (a fix written into the wrong file shows), in
    sub-folders, with CRLF, BOM and Latin-1 variants and some that need no
    fix.  Most are small: fixing costs a few libcst parses per file, and the
    test runs the whole tree dozens of times."""
    sources = [(FIXTURES / name).read_bytes() for name in ("basic.py", "aliases.py", "multiline.py")]
    files: dict[str, bytes] = {}
    for i in range(count):
        if i % 4 == 0:
            data = f"# file {i}\n".encode() + sources[i // 4 % len(sources)]
        else:
            data = (
                f"from torch.utils.data import DataLoader\n\nloader_{i} = DataLoader(dataset, batch_size={i + 1})\n"
            ).encode()
        if i % 10 == 3:
            data = data.replace(b"\n", b"\r\n")
        elif i % 10 == 7:
            data = codecs.BOM_UTF8 + data
        elif i % 10 == 9:
            data = b"# -*- coding: latin-1 -*-\n# \xe9t\xe9\n" + data
        if i % 17 == 0:
            data += b"# loadlint: noqa\n"
        files[f"pkg{i % 7}/module_{i}.py"] = data
    return files


def write_tree(tree: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = tree / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def read_tree(tree: Path) -> dict[str, bytes]:
    return {p.relative_to(tree).as_posix(): p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()}


def temp_files(tree: Path) -> list[Path]:
    return sorted(p for p in tree.rglob(f"*{TEMP_SUFFIX}"))


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[dict[str, bytes], dict[str, bytes], float]:
    """(originals, fully fixed versions, seconds an uninterrupted run takes)."""
    root = tmp_path_factory.mktemp("reference")
    originals = make_originals()
    write_tree(root / "tree", originals)
    start = time.monotonic()
    proc = subprocess.run(fix_command(root / "tree", root / "cache"), capture_output=True, env=env(), timeout=300)
    duration = time.monotonic() - start
    assert proc.returncode in (0, 1) and b"Traceback" not in proc.stderr, proc.stderr.decode()
    fixed = read_tree(root / "tree")
    assert set(fixed) == set(originals)
    changed = sum(fixed[k] != originals[k] for k in originals)
    assert changed > 150, "most files must get a fix, or the kill test proves little"
    assert not temp_files(root / "tree")
    return originals, fixed, duration


@pytest.fixture(scope="module")
def round_versions(tmp_path_factory, reference) -> dict[str, set[bytes]]:
    """Each file's versions after each round of a fix run (its rounds
    stopped after 0, 1, ... of the project rounds), beside the final one."""
    from loadlint.run import runner
    from loadlint.api import FixRequest, Overrides, check_paths

    originals, fixed, _ = reference
    versions: dict[str, set[bytes]] = {rel: {fixed[rel]} for rel in originals}
    for rounds in range(runner.FIX_ROUNDS):
        tree = tmp_path_factory.mktemp(f"rounds{rounds}") / "tree"
        write_tree(tree, originals)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(runner, "FIX_ROUNDS", rounds)
            check_paths([tree], Overrides(target=Target(cpus=4, gpus=1)), isolated=True, fix=FixRequest())
        for rel, data in read_tree(tree).items():
            versions[rel].add(data)
    return versions


def check_integrity(
    tree: Path, originals: dict[str, bytes], fixed: dict[str, bytes], rounds: dict[str, set[bytes]] | None = None
) -> tuple[int, int]:
    """(files fixed, files original); fails on anything else (a version a
    round wrote whole, in ``rounds``, counts as fixed)."""
    now = read_tree(tree)
    now = {k: v for k, v in now.items() if not k.endswith(TEMP_SUFFIX)}
    assert set(now) == set(originals), set(now) ^ set(originals)
    done = original = 0
    for rel, data in now.items():
        if data != originals[rel] and (data == fixed[rel] or (rounds is not None and data in rounds[rel])):
            done += 1
        elif data == originals[rel]:
            original += 1
        else:
            pytest.fail(f"{rel} is neither its original nor its fixed version:\n{data[:2000]!r}")
    return done, original


def newest_mtime(tree: Path) -> int:
    return max(p.stat().st_mtime_ns for p in tree.rglob("*.py"))


def run_killed(tree: Path, cache: Path, rng: random.Random, duration: float) -> int:
    written_before = newest_mtime(tree)
    proc = subprocess.Popen(
        fix_command(tree, cache), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env(), start_new_session=True
    )
    if rng.random() < 0.25:
        # Any moment, start-up included.
        time.sleep(rng.uniform(0.0, duration))
    else:
        # Most kills while files are being written, the moment that matters.
        deadline = time.monotonic() + duration * 2
        while proc.poll() is None and time.monotonic() < deadline and newest_mtime(tree) <= written_before:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.5))
    # The whole session: pool workers die with the parent, as with a CI
    # timeout or a closed terminal.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _, stderr = proc.communicate(timeout=60)
    assert b"Traceback" not in stderr, stderr.decode()
    return proc.returncode


def kill_test(tmp_path: Path, reference, rounds: dict[str, set[bytes]], runs: int, seed: int) -> dict[str, int]:
    originals, fixed, duration = reference
    rng = random.Random(seed)
    tree, cache = tmp_path / "tree", tmp_path / "cache"
    stats = {"runs": 0, "killed": 0, "completed": 0, "partial": 0, "left_temp": 0, "recoveries": 0}
    write_tree(tree, originals)
    for run in range(runs):
        code = run_killed(tree, cache, rng, duration)
        stats["runs"] += 1
        stats["killed" if code == -signal.SIGKILL else "completed"] += 1
        done, original = check_integrity(tree, originals, fixed, rounds)
        if done and original:
            stats["partial"] += 1
        if temp_files(tree):
            stats["left_temp"] += 1
        if run in (runs // 2, runs - 1):
            # The next complete run finishes the job and clears what a kill
            # left behind.
            proc = subprocess.run(fix_command(tree, cache), capture_output=True, env=env(), timeout=300)
            assert proc.returncode in (0, 1) and b"Traceback" not in proc.stderr, proc.stderr.decode()
            assert read_tree(tree) == fixed
            assert temp_files(tree) == []
            stats["recoveries"] += 1
            write_tree(tree, originals)
        elif rng.random() < 0.5:
            write_tree(tree, originals)  # else the next run starts from a half-fixed tree
    return stats


@pytest.mark.slow
def test_kill_during_fix(tmp_path, reference, round_versions):
    stats = kill_test(tmp_path, reference, round_versions, KILL_RUNS, seed=KILL_RUNS)
    print(f"kill test: {stats}")
    assert stats["killed"] >= KILL_RUNS // 2
    assert stats["partial"] >= 1, "no kill landed while files were being written"


@pytest.mark.fuzz_long
def test_kill_during_fix_long(tmp_path, reference, round_versions):
    runs = int(os.environ.get("LOADLINT_KILL_RUNS_LONG", "200"))
    stats = kill_test(tmp_path, reference, round_versions, runs, seed=runs)
    print(f"kill test (long): {stats}")
    assert stats["partial"] >= 1


KILL_IN_WRITE = r"""
import os, signal, sys
import loadlint.api as api
real_replace = os.replace
def die(src, dst, *a, **k):
    if str(src).endswith(".loadlint-tmp"):
        os.kill(os.getpid(), signal.SIGKILL)
    return real_replace(src, dst, *a, **k)
api.os.replace = die
from loadlint.frontends.cli import main
sys.exit(main(["fix", "--no-cache", "--target", "cpus=4,gpus=1", "-j", "1", sys.argv[1]]))
"""


def test_kill_between_temp_file_and_rename_leaves_nothing_after_next_run(tmp_path):
    originals = {f"m{i}.py": (FIXTURES / "basic.py").read_bytes() + f"# {i}\n".encode() for i in range(3)}
    write_tree(tmp_path / "tree", originals)
    proc = subprocess.run([sys.executable, "-c", KILL_IN_WRITE, str(tmp_path / "tree")], env=env(), capture_output=True)
    assert proc.returncode == -signal.SIGKILL
    # The original is intact; the temporary file is what a kill can leave.
    assert {k: v for k, v in read_tree(tmp_path / "tree").items() if not k.endswith(TEMP_SUFFIX)} == originals
    assert len(temp_files(tmp_path / "tree")) == 1
    proc = subprocess.run(fix_command(tmp_path / "tree", tmp_path / "cache"), capture_output=True, env=env())
    assert proc.returncode == 0, proc.stderr.decode()
    assert temp_files(tmp_path / "tree") == []
    assert all(b"num_workers=3" in data for data in read_tree(tmp_path / "tree").values())


def test_temp_file_of_a_live_writer_is_kept(tmp_path):
    from loadlint.sources.files import remove_stale_temps

    target = tmp_path / "m.py"
    target.write_bytes(b"x = 1\n")
    live = tmp_path / f".m.py.{os.getpid()}.abc{TEMP_SUFFIX}"
    live.write_bytes(b"half")
    dead_pid = _dead_pid()
    dead = tmp_path / f".m.py.{dead_pid}.abc{TEMP_SUFFIX}"
    dead.write_bytes(b"half")
    other = tmp_path / f".other.py.{dead_pid}.abc{TEMP_SUFFIX}"
    other.write_bytes(b"half")
    foreign = tmp_path / f".m.py.notapid{TEMP_SUFFIX}"
    foreign.write_bytes(b"user data")
    # The temporary file of "m.py.5.py", not of "m.py".
    neighbour = tmp_path / f".m.py.5.py.{dead_pid}.abc{TEMP_SUFFIX}"
    neighbour.write_bytes(b"half")
    remove_stale_temps(target)
    assert not dead.exists()
    assert live.exists() and other.exists() and foreign.exists() and neighbour.exists()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_two_fixes_at_once(tmp_path, reference):
    originals, fixed, _ = reference
    tree = tmp_path / "tree"
    for attempt in range(1):
        write_tree(tree, originals)
        procs = [
            subprocess.Popen(fix_command(tree, tmp_path / f"cache{i}"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
            for i in range(2)
        ]
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode in (0, 1), err.decode()
            assert b"Traceback" not in err, err.decode()
        # Where both fixed a file the second saw it changed and left it.
        assert read_tree(tree) == fixed
        assert temp_files(tree) == []


def options() -> Options:
    from loadlint.types import HardwareProfile

    profile = HardwareProfile(usable_cpus=4, gpu_count=1, declared=frozenset({"cpus", "gpus"}))
    return Options(select=frozenset(CODES), profile_factory=lambda: profile)


def test_file_changed_between_read_and_write(tmp_path):
    from loadlint.api import FixRequest

    path = tmp_path / "m.py"
    old = (FIXTURES / "basic.py").read_bytes()
    path.write_bytes(old)
    # Someone saves the file after loadlint read it.
    edited = old.replace(b"batch_size=32", b"batch_size=64")
    path.write_bytes(edited)
    result = fix_bytes(path, old, options(), FixRequest())
    assert result.error and "changed on disk" in result.error
    assert result.fixed is None
    assert path.read_bytes() == edited
    assert list(tmp_path.iterdir()) == [path]


def test_file_changed_at_the_last_moment(tmp_path, monkeypatch):
    # The change lands after the temporary file is written, just before the
    # rename: the check right before the rename still catches it.
    path = tmp_path / "m.py"
    path.write_bytes(b"old\n")
    real_fsync = os.fsync

    def editor_saves(fd):
        real_fsync(fd)
        path.write_bytes(b"edited\n")

    monkeypatch.setattr(os, "fsync", editor_saves)
    with pytest.raises(FileChanged):
        write_atomic(path, b"old\n", b"fixed\n")
    monkeypatch.undo()
    assert path.read_bytes() == b"edited\n"
    assert list(tmp_path.iterdir()) == [path]


def test_read_only_file_is_left_alone(tmp_path):
    from loadlint.api import FixRequest

    path = tmp_path / "m.py"
    data = (FIXTURES / "basic.py").read_bytes()
    path.write_bytes(data)
    path.chmod(0o444)
    result = fix_bytes(path, data, options(), FixRequest())
    assert result.error and result.fixed is None
    assert path.read_bytes() == data and sorted(tmp_path.iterdir()) == [path]


def test_mode_is_kept(tmp_path):
    path = tmp_path / "run.py"
    path.write_bytes(b"old\n")
    path.chmod(0o751)
    write_atomic(path, b"old\n", b"new\n")
    assert path.read_bytes() == b"new\n" and (path.stat().st_mode & 0o777) == 0o751
