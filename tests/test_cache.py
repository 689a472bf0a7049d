"""The result cache: what makes an entry a hit, what makes it a miss, and
that a damaged, foreign or unwritable cache never changes a result nor
stops a run."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import loadlint.workspace.cache as cache_mod
import loadlint.run.runner as runner
import loadlint.engine.pipeline as pipeline
from loadlint.api import ProfileCache
from loadlint.workspace.cache import CACHEDIR_TAG, Cache
from loadlint.frontends.cli import cli
from loadlint.types import Target
from loadlint.workspace.config import Overrides, ConfigResolver, Settings
from loadlint.workspace.discover import Candidate, discover
from loadlint.types import HardwareProfile

SLOW = """import torch
from torch.utils.data import DataLoader


def make(ds):
    return DataLoader(ds, batch_size=32)


for batch in make(None):
    batch.to("cuda")
"""
CLEAN = "import os\nprint(os.getcwd())\n"
PROFILE = HardwareProfile(usable_cpus=4, logical_cpus=4, gpu_count=1)


def profiles_with(profile: HardwareProfile = PROFILE, target: Target = Target()) -> ProfileCache:
    profiles = ProfileCache()
    profiles._profiles[target] = profile
    return profiles


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "slow.py").write_text(SLOW)
    (src / "other.py").write_text(SLOW.replace("batch_size=32", "batch_size=8"))
    (src / "clean.py").write_text(CLEAN)
    return src


class Counter:
    """Counts the files that reach the engine."""

    def __init__(self, monkeypatch) -> None:
        self.paths: list[str] = []
        real = pipeline.lint_bytes

        def counting(data, path, options):
            self.paths.append(Path(path).name)
            return real(data, path, options)

        monkeypatch.setattr(pipeline, "lint_bytes", counting)


def lint(tree: Path, cache_dir: Path, *, settings: Settings | None = None, profiles: ProfileCache | None = None,
         jobs: int = 1):
    settings = settings or Settings(root=str(tree))
    candidates = [Candidate(p, settings, False) for p in sorted(tree.rglob("*.py"))]
    return runner.lint_candidates(
        candidates,
        cache=cache_mod.lazy_cache(cache_dir),
        jobs=jobs,
        profiles=profiles or profiles_with(),
    )


def summary(run) -> list[tuple]:
    return [(Path(f.path).name, f.code, f.location.row, f.location.column, f.message, f.fix) for f in run.findings]


def entries(cache_dir: Path) -> list[Path]:
    return sorted((cache_dir / cache_mod.__version__).glob("*.json"))


def test_second_run_is_answered_from_the_cache(tree, tmp_path, monkeypatch):
    counter = Counter(monkeypatch)
    cache_dir = tmp_path / "cache"
    first = lint(tree, cache_dir)
    assert sorted(counter.paths) == ["other.py", "slow.py"]  # clean.py never passes the pre-filter
    assert len(entries(cache_dir)) == 2
    counter.paths.clear()
    second = lint(tree, cache_dir)
    assert counter.paths == []
    assert summary(first) == summary(second)
    assert summary(first)  # the fixture has findings, so the comparison means something
    # The report quotes source lines, so a hit carries the text again.
    assert all(r.source is not None for r in second.results)


def test_cache_folder_is_tagged_and_ignored_by_git(tree, tmp_path):
    cache_dir = tmp_path / "cache"
    lint(tree, cache_dir)
    assert (cache_dir / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert (cache_dir / ".gitignore").read_text().splitlines()[-1] == "*"


def test_content_change_is_a_miss(tree, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    lint(tree, cache_dir)
    counter = Counter(monkeypatch)
    (tree / "slow.py").write_text(SLOW.replace("batch_size=32)", "batch_size=32, num_workers=3, pin_memory=True)"))
    run = lint(tree, cache_dir)
    assert counter.paths == ["slow.py"]
    assert "slow.py" not in {Path(f.path).name for f in run.findings}
    # The entry was replaced, not added to.
    assert len(entries(cache_dir)) == 2


def test_same_content_same_mtime_touch_is_a_hit(tree, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    lint(tree, cache_dir)
    os.utime(tree / "slow.py", None)
    counter = Counter(monkeypatch)
    lint(tree, cache_dir)
    assert counter.paths == []


def test_version_change_is_a_miss(tree, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    lint(tree, cache_dir)
    monkeypatch.setattr(cache_mod, "__version__", "99.0.0")
    counter = Counter(monkeypatch)
    lint(tree, cache_dir)
    assert sorted(counter.paths) == ["other.py", "slow.py"]
    assert (cache_dir / "99.0.0").is_dir()


def test_changed_loadlint_code_is_a_miss(tree, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    lint(tree, cache_dir)
    # Same version number, different code (an editable install being worked on).
    monkeypatch.setattr(cache_mod, "code_stamp", lambda: "another-build")
    counter = Counter(monkeypatch)
    lint(tree, cache_dir)
    assert sorted(counter.paths) == ["other.py", "slow.py"]


def test_config_change_is_a_miss(tree, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    lint(tree, cache_dir)
    counter = Counter(monkeypatch)
    narrowed = Settings(select=("LL202",), root=str(tree))
    run = lint(tree, cache_dir, settings=narrowed)
    assert sorted(counter.paths) == ["other.py", "slow.py"]
    assert {f.code for f in run.findings} == {"LL202"}
    counter.paths.clear()
    # Both configurations keep their entries: switching back is a hit.
    lint(tree, cache_dir)
    assert counter.paths == []


def test_target_change_is_a_miss(tree, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    small = Settings(root=str(tree), target=Target(cpus=4, gpus=1))
    big = Settings(root=str(tree), target=Target(cpus=64, gpus=1))
    profiles = ProfileCache()
    profiles._profiles[small.target] = HardwareProfile(usable_cpus=4, gpu_count=1, declared=frozenset({"cpus", "gpus"}))
    profiles._profiles[big.target] = HardwareProfile(usable_cpus=64, gpu_count=1, declared=frozenset({"cpus", "gpus"}))
    first = lint(tree, cache_dir, settings=small, profiles=profiles)
    counter = Counter(monkeypatch)
    second = lint(tree, cache_dir, settings=big, profiles=profiles)
    assert sorted(counter.paths) == ["other.py", "slow.py"]
    assert summary(first) != summary(second)  # the suggested num_workers differs


def test_this_machines_cpus_are_a_miss_for_findings_that_quote_them(tree, tmp_path, monkeypatch):
    # No target: LL201's message quotes what the fix's count gives on this machine.
    cache_dir = tmp_path / "cache"
    first = lint(tree, cache_dir, profiles=profiles_with(HardwareProfile(usable_cpus=1, here_cpus=4)))
    stored = [json.loads(p.read_text()) for p in entries(cache_dir)]
    assert all(entry["profile"] for entry in stored)  # LL201's hint read the CPU count
    counter = Counter(monkeypatch)
    second = lint(tree, cache_dir, profiles=profiles_with(HardwareProfile(usable_cpus=1, here_cpus=32)))
    assert sorted(counter.paths) == ["other.py", "slow.py"]
    assert summary(first) != summary(second)


def test_available_memory_does_not_invalidate(tree, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    lint(tree, cache_dir, profiles=profiles_with(HardwareProfile(usable_cpus=4, gpu_count=1, memory_available=1 << 30)))
    counter = Counter(monkeypatch)
    lint(tree, cache_dir, profiles=profiles_with(HardwareProfile(usable_cpus=4, gpu_count=1, memory_available=5 << 30)))
    assert counter.paths == []


def test_entry_that_never_read_the_profile_does_not_probe_the_machine(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    # Passes the pre-filter (so it is parsed) but builds no torch DataLoader: no rule runs.
    (src / "mention.py").write_text("from mylib import DataLoader\nloader = DataLoader(x)\n")
    cache_dir = tmp_path / "cache"
    lint(src, cache_dir)
    [entry] = [json.loads(p.read_text()) for p in entries(cache_dir)]
    assert entry["profile"] is None

    class Untouchable(ProfileCache):
        def get(self, target):
            def factory():
                raise AssertionError("the warm run probed the hardware")

            return factory

    counter = Counter(monkeypatch)
    lint(src, cache_dir, profiles=Untouchable())
    assert counter.paths == []


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"\x00\xff garbage",
        b'{"loadlint": "0.1.0"',  # truncated
        b"[1, 2, 3]",
        b'{"hello": "world"}',  # some other tool's JSON
        b"null",
        b'{"loadlint": "0.1.0", "schema": 1}',
    ],
    ids=["empty", "binary", "truncated", "list", "foreign", "null", "partial"],
)
def test_corrupt_or_foreign_entry_is_ignored_and_rewritten(tree, tmp_path, monkeypatch, damage):
    cache_dir = tmp_path / "cache"
    first = lint(tree, cache_dir)
    for path in entries(cache_dir):
        path.write_bytes(damage)
    counter = Counter(monkeypatch)
    second = lint(tree, cache_dir)
    assert sorted(counter.paths) == ["other.py", "slow.py"]
    assert summary(first) == summary(second)
    counter.paths.clear()
    lint(tree, cache_dir)
    assert counter.paths == []  # rewritten, valid again


def _tamper(cache_dir: Path, change) -> None:
    for path in entries(cache_dir):
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(digest="0" * 40),
        lambda d: d.update(path="/elsewhere/slow.py"),
        lambda d: d.update(fingerprint="something else"),
        lambda d: d.update(stamp="another build"),
        lambda d: d.update(schema=0),
        lambda d: d["findings"][0].update(location=[1, "2"]),
        lambda d: d["findings"][0].update(location=[True, 2]),
        lambda d: d["findings"][0].update(code=None),
        lambda d: d["findings"][0].update(fix={"applicability": "always", "message": "x", "edits": []}),
        lambda d: d["findings"][0]["fix"]["edits"][0].append("extra"),
        lambda d: d.update(findings={"not": "a list"}),
        lambda d: d.update(profile=7),
    ],
    ids=["digest", "path", "fingerprint", "stamp", "schema", "location-type", "location-bool", "code",
         "applicability", "edit-shape", "findings-type", "profile-type"],
)
def test_entry_that_does_not_check_out_is_not_trusted(tree, tmp_path, monkeypatch, change):
    cache_dir = tmp_path / "cache"
    first = lint(tree, cache_dir)
    _tamper(cache_dir, change)
    counter = Counter(monkeypatch)
    second = lint(tree, cache_dir)
    assert sorted(counter.paths) == ["other.py", "slow.py"]
    assert summary(first) == summary(second)


def test_entry_copied_to_another_file_is_not_used(tmp_path, monkeypatch):
    """An entry is bound to its path: a twin file with other content must not
    pick up a neighbour's findings through a copied entry."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text(SLOW)
    cache_dir = tmp_path / "cache"
    lint(src, cache_dir)
    [entry] = entries(cache_dir)
    (src / "b.py").write_text(SLOW)
    fingerprint = Settings(root=str(src)).fingerprint(str(src / "b.py"))
    target = cache_dir / cache_mod.__version__ / Cache.entry_name(str(src / "b.py"), fingerprint)
    target.write_bytes(entry.read_bytes())
    counter = Counter(monkeypatch)
    lint(src, cache_dir)
    assert counter.paths == ["b.py"]


def test_unwritable_cache_location_is_silent(tree, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    first = lint(tree, blocker / "cache")  # cannot be created: its parent is a file
    second = lint(tree, tmp_path / "fresh")
    assert summary(first) == summary(second)


def test_read_only_cache_is_still_read(tree, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    lint(tree, cache_dir)
    (tree / "slow.py").write_text(SLOW + "\n# edited\n")

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Read-only file system")

    monkeypatch.setattr(cache_mod.os, "replace", refuse)
    counter = Counter(monkeypatch)
    run = lint(tree, cache_dir)
    assert counter.paths == ["slow.py"]  # other.py still a hit
    assert {Path(f.path).name for f in run.findings} == {"slow.py", "other.py"}
    assert not list((cache_dir / cache_mod.__version__).glob(".*.tmp"))  # no litter


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root writes through file modes")
def test_read_only_cache_folder(tree, tmp_path):
    cache_dir = tmp_path / "cache"
    lint(tree, cache_dir)
    (tree / "slow.py").write_text(SLOW + "\n# edited\n")
    os.chmod(cache_dir / cache_mod.__version__, 0o500)
    try:
        run = lint(tree, cache_dir)
    finally:
        os.chmod(cache_dir / cache_mod.__version__, 0o700)
    assert {Path(f.path).name for f in run.findings} == {"slow.py", "other.py"}


def test_fix_mode_uses_a_hit_only_when_there_is_nothing_to_fix(tree, tmp_path, monkeypatch):
    from loadlint.api import FixRequest

    cache_dir = tmp_path / "cache"
    lint(tree, cache_dir)
    settings = Settings(root=str(tree))
    candidates = [Candidate(p, settings, False) for p in sorted(tree.rglob("*.py"))]
    run = runner.lint_candidates(
        candidates, FixRequest(unsafe=False, dry_run=True), cache=cache_mod.lazy_cache(cache_dir), jobs=1,
        profiles=profiles_with(),
    )
    # The hits carry fixable findings, so both files are fixed for real.
    assert {Path(r.path).name for r in run.results if r.fixed} == {"slow.py", "other.py"}


# -- the command line ------------------------------------------------------


def invoke(args, cwd: Path, env=None):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, args, env={"LOADLINT_CACHE_DIR": None, **(env or {})}, catch_exceptions=False)
    finally:
        os.chdir(old)


ARGS = ["check", "--target", "cpus=4,gpus=1", "--output-format", "concise"]


def test_cli_writes_the_default_cache_and_no_cache_writes_nothing(tree):
    project = tree.parent
    first = invoke([*ARGS, "--no-cache", "src"], project)
    assert not (project / ".loadlint_cache").exists()
    second = invoke([*ARGS, "src"], project)
    assert (project / ".loadlint_cache" / "CACHEDIR.TAG").is_file()
    third = invoke([*ARGS, "src"], project)
    assert first.output == second.output == third.output
    assert first.exit_code == second.exit_code == third.exit_code == 1


def test_cli_cache_dir_option_and_environment(tree, tmp_path):
    project = tree.parent
    invoke([*ARGS, "--cache-dir", str(tmp_path / "mine"), "src"], project)
    assert (tmp_path / "mine" / "CACHEDIR.TAG").is_file()
    invoke([*ARGS, "src"], project, env={"LOADLINT_CACHE_DIR": str(tmp_path / "env")})
    assert (tmp_path / "env" / "CACHEDIR.TAG").is_file()
    assert not (project / ".loadlint_cache").exists()


def test_clean_removes_the_cache(tree):
    project = tree.parent
    invoke([*ARGS, "src"], project)
    result = invoke(["clean"], project)
    assert result.exit_code == 0
    assert "Removing cache at" in result.output
    assert not (project / ".loadlint_cache").exists()


def test_the_cache_is_at_the_project_root_wherever_loadlint_runs_inside(tree):
    project = tree.parent
    (project / "pyproject.toml").write_text("[tool.loadlint]\n")
    invoke([*ARGS, "."], tree)
    assert (project / ".loadlint_cache" / "CACHEDIR.TAG").is_file()
    assert not (tree / ".loadlint_cache").exists()
    # clean from a subfolder removes the project's cache (outside the current folder: named in full).
    result = invoke(["clean"], tree)
    assert (result.exit_code, result.output) == (0, f"Removing cache at: {project / '.loadlint_cache'}\n")
    assert not (project / ".loadlint_cache").exists()


def test_clean_refuses_a_folder_that_is_not_a_cache(tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    result = invoke(["clean", "--cache-dir", str(precious)], tmp_path)
    assert (precious / "thesis.tex").exists()
    assert "not a loadlint cache" in result.output


def test_cachedir_tag_is_the_standard_one():
    assert CACHEDIR_TAG.startswith("Signature: 8a477f597d28d172789f06886806bc55\n")


def test_profile_key_does_not_depend_on_string_hashing():
    # The key is compared across processes, whose set orders differ.
    import subprocess
    import sys

    script = (
        "from loadlint.workspace.cache import profile_key\n"
        "from loadlint.types import HardwareProfile\n"
        "print(profile_key(HardwareProfile(usable_cpus=4, gpu_count=1, "
        "declared=frozenset({'cpus', 'gpus', 'memory', 'platform', 'python'}))))\n"
    )
    keys = {
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True,
            env={**__import__("os").environ, "PYTHONHASHSEED": str(seed)},
        ).stdout
        for seed in range(6)
    }
    assert len(keys) == 1


def test_notebook_is_answered_from_the_cache_with_its_cells(tree, tmp_path, monkeypatch):
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# title"]},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": SLOW.splitlines(True)},
    ]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tree / "train.ipynb").write_text(json.dumps(notebook))
    settings = Settings(root=str(tree))
    candidates = [Candidate(p, settings, False) for p in sorted(tree.rglob("*.ip*"))]
    first = runner.lint_candidates(candidates, cache=cache_mod.lazy_cache(tmp_path / "cache"), jobs=1, profiles=profiles_with())
    import loadlint.engine.notebook as notebook_mod

    checked: list[str] = []
    real = notebook_mod.analyse_cells
    monkeypatch.setattr(notebook_mod, "analyse_cells", lambda *a, **k: checked.append("x") or real(*a, **k))
    second = runner.lint_candidates(candidates, cache=cache_mod.lazy_cache(tmp_path / "cache"), jobs=1, profiles=profiles_with())
    assert checked == []
    assert summary(first) == summary(second) and summary(first)
    assert [f.cell for f in first.findings] == [f.cell for f in second.findings]
    # The report quotes the cells' lines.
    assert second.results[0].cell_sources == first.results[0].cell_sources == {2: SLOW}
    assert second.results[0].source is None
    (tree / "train.ipynb").write_text(json.dumps(notebook).replace("batch_size=32", "batch_size=32, num_workers=2"))
    third = runner.lint_candidates(candidates, cache=cache_mod.lazy_cache(tmp_path / "cache"), jobs=1, profiles=profiles_with())
    assert checked == ["x"] and summary(third) != summary(first)


class Reads:
    """Counts the files the runner reads."""

    def __init__(self, monkeypatch) -> None:
        self.names: list[str] = []
        real = runner.read_resolved

        def counting(path, *args, **kwargs):
            self.names.append(Path(path).name)
            return real(path, *args, **kwargs)

        monkeypatch.setattr(runner, "read_resolved", counting)


def turned_away(cache_dir: Path) -> list[str]:
    raw = json.loads((cache_dir / cache_mod.__version__ / cache_mod.TURNED_AWAY).read_text())
    return sorted(Path(p).name for p in raw["files"])


def test_a_file_the_prefilter_turned_away_is_not_read_again(tree, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    first = lint(tree, cache_dir)
    assert turned_away(cache_dir) == ["clean.py"]
    reads = Reads(monkeypatch)
    second = lint(tree, cache_dir)
    assert sorted(reads.names) == ["other.py", "slow.py"]  # clean.py: its signature is unchanged
    assert summary(second) == summary(first)


def test_a_turned_away_file_that_changes_is_read_and_checked(tree, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    lint(tree, cache_dir)
    # Same size as before: the modification time alone tells the change.
    text = CLEAN.replace("print(os.getcwd())", "DataLoader(x,  y)").ljust(len(CLEAN) - 1) + "\n"
    assert len(text) == len(CLEAN)
    (tree / "clean.py").write_text(text)
    st = (tree / "clean.py").stat()
    os.utime(tree / "clean.py", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    counter = Counter(monkeypatch)
    lint(tree, cache_dir)
    assert counter.paths == ["clean.py"]
    assert turned_away(cache_dir) == []


def test_a_link_turned_elsewhere_is_read_again(tree, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    (tmp_path / "a.py").write_text(CLEAN)
    (tmp_path / "b.py").write_text(SLOW)
    (tree / "link.py").symlink_to(tmp_path / "a.py")
    settings = Settings(root=str(tree))
    runner.lint_candidates([Candidate(tree / "link.py", settings, False)], cache=cache_mod.lazy_cache(cache_dir),
                           jobs=1, profiles=profiles_with())
    assert turned_away(cache_dir) == ["link.py"]
    (tree / "link.py").unlink()
    (tree / "link.py").symlink_to(tmp_path / "b.py")
    counter = Counter(monkeypatch)
    runner.lint_candidates([Candidate(tree / "link.py", settings, False)], cache=cache_mod.lazy_cache(cache_dir),
                           jobs=1, profiles=profiles_with())
    assert counter.paths == ["link.py"]


def test_the_record_keeps_other_folders_files(tmp_path):
    cache_dir = tmp_path / "cache"
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name}.py").write_text(CLEAN)
    lint(tmp_path / "one", cache_dir)
    lint(tmp_path / "two", cache_dir)
    assert turned_away(cache_dir) == ["one.py", "two.py"]


def test_a_record_of_other_code_is_not_trusted(tree, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    lint(tree, cache_dir)
    monkeypatch.setattr(cache_mod, "code_stamp", lambda: "another stamp")
    reads = Reads(monkeypatch)
    lint(tree, cache_dir)
    assert sorted(reads.names) == ["clean.py", "other.py", "slow.py"]


def test_no_cache_keeps_no_record(tree, tmp_path, monkeypatch):
    settings = Settings(root=str(tree))
    candidates = [Candidate(p, settings, False) for p in sorted(tree.rglob("*.py"))]
    runner.lint_candidates(candidates, cache=None, jobs=1, profiles=profiles_with())
    reads = Reads(monkeypatch)
    runner.lint_candidates(candidates, cache=None, jobs=1, profiles=profiles_with())
    assert sorted(reads.names) == ["clean.py", "other.py", "slow.py"]
