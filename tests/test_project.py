"""Project analysis: golden multi-module projects, and bad input.

Each folder of tests/fixtures/projects is a project (its own root marker);
``expected.txt`` holds ``loadlint check`` concise output run inside it.
Regenerate with ``LOADLINT_REGEN=1`` and review the diff.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadlint.frontends.cli import cli
from loadlint.engine.summaries import summarise_text
from loadlint.project.modules import ModuleResolver, project_root

PROJECTS = Path(__file__).parent / "fixtures" / "projects"
EXAMPLE = Path(__file__).parents[1] / "examples" / "modular"
TARGET = "cpus=8,gpus=1,memory=64,shm=16,platform=linux,python=3.14"
ENV = {"NO_COLOR": "1", "LOADLINT_CACHE_DIR": None}


def check(folder: Path, *args: str) -> str:
    old = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(
            cli,
            ["check", "--isolated", "--select", "ALL", "--target", TARGET, "--output-format", "concise", "-q", *args],
            env=ENV,
            catch_exceptions=False,
        )
    finally:
        os.chdir(old)
    return result.output


@pytest.mark.parametrize("case", sorted(p.name for p in PROJECTS.iterdir() if p.is_dir()))
def test_project_golden(case: str) -> None:
    folder = PROJECTS / case
    actual = check(folder, "--no-cache", ".")
    expected = folder / "expected.txt"
    if os.environ.get("LOADLINT_REGEN"):
        expected.write_text(actual, encoding="utf-8")
    assert actual == expected.read_text(encoding="utf-8")


def example_project(tmp_path: Path) -> Path:
    """The README's multi-module example, as a project of its own."""
    project = tmp_path / "modular"
    shutil.copytree(EXAMPLE, project)
    (project / "pyproject.toml").touch()
    return project


def test_example_project_reports_its_chains(tmp_path: Path) -> None:
    out = check(example_project(tmp_path), "--no-cache", ".")
    assert out.count("LL204") == 2 and "from train.py:16" in out
    assert "train.py:16:1: LL013" in out and "(engine.py:9, in `train_step`)" in out


def test_finding_follows_a_dependency_edit(tmp_path: Path) -> None:
    project = example_project(tmp_path)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    first = check(project, *cache, ".")
    assert "LL204" in first and "test_step" in first
    engine = project / "engine.py"
    engine.write_text(engine.read_text().replace("for epoch in range(epochs):", "if epochs:\n        epoch = 0"))
    second = check(project, *cache, ".")
    assert second != first and "test_step" not in second
    # Only the staged file is reported; the rest of the project is read.
    staged = check(project, *cache, "data_setup.py")
    assert all(line.startswith("data_setup.py") for line in staged.splitlines())
    engine.write_text(engine.read_text().replace("if epochs:\n        epoch = 0", "for epoch in range(epochs):"))
    assert "test_step" in check(project, *cache, "data_setup.py")


def test_percent_cells_mark_a_notebook_script(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    shutil.copytree(PROJECTS / "percent_script", plain)
    script = plain / "tutorial.py"
    script.write_text(script.read_text().replace("# %%\n", ""))
    assert "LL013" in check(plain, "--no-cache", ".")


def test_staged_factory_sees_its_callers(tmp_path: Path) -> None:
    project = tmp_path / "p"
    shutil.copytree(PROJECTS / "factory_values", project)
    out = check(project, "--no-cache", "loaders.py")
    assert "LL201" in out and "train.py:5" in out
    assert "train.py" not in {line.split(":")[0] for line in out.splitlines()}


def test_summary_is_plain_data() -> None:
    import json

    text = (EXAMPLE / "data_setup.py").read_text()
    summary = summarise_text(text)
    assert summary is not None
    assert json.loads(json.dumps(summary)) == summary
    factory = summary["functions"]["create_dataloaders"]
    assert factory["defaults"]["num_workers"] == {"cpu_count": True}
    assert factory["loaders"][0]["kw"]["num_workers"] == "num_workers"
    assert factory["returns"]["values"][0] == {"loader": 0}
    assert summarise_text("def broken(:\n") is None


def test_same_module_name_in_two_folders_resolves_to_the_nearest(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").touch()
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "data.py").write_text("def f(): pass\n")
        (tmp_path / folder / "train.py").write_text("import data\n")
    resolver = ModuleResolver(project_root(tmp_path / "one"))
    assert resolver.module_file(str(tmp_path / "one" / "train.py"), "data.f") == (str(tmp_path / "one" / "data.py"), "f")
    assert resolver.module_file(str(tmp_path / "two" / "train.py"), "data.f") == (str(tmp_path / "two" / "data.py"), "f")
    assert resolver.module_file(str(tmp_path / "two" / "train.py"), "torch.utils.data.DataLoader") is None


def test_a_module_named_setup_in_a_package_does_not_start_a_project(tmp_path: Path) -> None:
    # Lightning's ``trainer/setup.py`` is a module: its package stays in the repository's project.
    (tmp_path / "pyproject.toml").touch()
    package = tmp_path / "pkg" / "trainer"
    (package / "connectors").mkdir(parents=True)
    for folder in (tmp_path / "pkg", package, package / "connectors"):
        (folder / "__init__.py").touch()
    (package / "setup.py").write_text("def f(): pass\n")
    assert project_root(package / "connectors") == tmp_path
    assert project_root(package) == tmp_path
    # A packaging script beside a package's sources still marks its project.
    standalone = tmp_path / "tools" / "plugin"
    standalone.mkdir(parents=True)
    (standalone / "setup.py").touch()
    assert project_root(standalone) == standalone
    (standalone / "pyproject.toml").touch()
    (standalone / "__init__.py").touch()
    assert project_root(standalone) == standalone


def test_symlink_loop_and_large_tree_stay_bounded(tmp_path: Path) -> None:
    project = example_project(tmp_path)
    (project / "loop").mkdir()
    os.symlink(project / "loop", project / "loop" / "again")
    os.symlink(project / "missing.py", project / "dangling.py")
    many = project / "many"
    many.mkdir()
    for i in range(10000):
        (many / f"m{i}.py").write_text(f"import data_setup\nX = {i}\n" if i % 1000 == 0 else f"X = {i}\n")
    start = time.monotonic()
    out = check(project, "--no-cache", "train.py", "data_setup.py")
    assert "LL204" in out and "LL013" in out
    assert time.monotonic() - start < 60


def test_project_roots_are_memoised_per_folder_in_a_tree_without_markers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from loadlint.sources import boundary

    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    checked: list[str] = []
    monkeypatch.setattr(boundary, "_marks_root", lambda folder: checked.append(folder) or False)
    memo: dict[str, Path | None] = {}
    assert project_root(deep, memo) == deep
    first = len(checked)
    assert first == len(deep.parents) + 1  # every folder up to the file system's root, once
    # Siblings and parents already passed cost one check each at most.
    (tmp_path / "a" / "b" / "d").mkdir()
    assert project_root(tmp_path / "a" / "b" / "d", memo) == tmp_path / "a" / "b" / "d"
    assert project_root(tmp_path / "a", memo) == tmp_path / "a"
    assert len(checked) == first + 1


def test_nested_roots_share_one_walk_of_the_tree(tmp_path: Path) -> None:
    from loadlint.project.join import Listing

    for folder in ("x", "x/y", "x/y/z", "x/.hidden", "x/w"):
        (tmp_path / folder).mkdir()
        for name in ("b.py", "a.py", "c.txt", "n.ipynb"):
            (tmp_path / folder / name).write_text("")
    listing = Listing()
    everything = listing.files(tmp_path)
    assert len(everything) == 12 and not any(".hidden" in path for path in everything)
    for folder in ("x", "x/y", "x/y/z", "x/w", "x/.hidden"):
        assert listing.files(tmp_path / folder) == Listing().files(tmp_path / folder)
    assert listing.files(tmp_path / "x" / "y") == [
        str(tmp_path / "x" / "y" / n) for n in ("a.py", "b.py", "n.ipynb")
    ] + [str(tmp_path / "x" / "y" / "z" / n) for n in ("a.py", "b.py", "n.ipynb")]


def test_a_pass_reporting_no_selected_code_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    import loadlint.project as project_package

    calls: list[str] = []
    real = project_package.trainer_runs
    monkeypatch.setattr(project_package, "trainer_runs", lambda *args: calls.append("ran") or real(*args))
    folder = PROJECTS / "lightning_gpu"
    monkeypatch.chdir(folder)

    def run(select: str) -> str:
        args = ["check", "--isolated", "--no-cache", "--select", select, "--target", TARGET, "--output-format",
                "concise", "-q", "."]
        return CliRunner().invoke(cli, args, env=ENV, catch_exceptions=False).output

    assert run("LL201,LL204") == ""
    assert calls == []
    out = run("LL202")
    assert calls == ["ran"]
    assert out == "".join(line for line in (folder / "expected.txt").read_text().splitlines(True) if " LL202 " in line)


def test_the_project_phase_searches_the_bytes_the_run_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from loadlint.run import runner
    from loadlint.sources import files

    project = example_project(tmp_path)
    real = files.read_source
    again: list[str] = []
    monkeypatch.setattr(files, "read_source", lambda path, *args: again.append(Path(path).name) or real(path, *args))
    kept = check(project, "--no-cache", ".")
    assert again == []
    monkeypatch.setattr(runner, "KEEP_BYTES", 0)
    assert check(project, "--no-cache", ".") == kept
    assert "train.py" in again
