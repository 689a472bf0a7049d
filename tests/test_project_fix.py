"""``fix`` runs the project phase ``check`` runs: after a fix, a second
``fix`` and a ``check`` report the same findings and exit code, on the
examples and on every golden project."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadlint.frontends.cli import cli

ROOT = Path(__file__).parents[1]
PROJECTS = ROOT / "tests" / "fixtures" / "projects"
TARGET = "cpus=8,gpus=1,memory=64,shm=16,platform=linux,python=3.14"
ENV = {"NO_COLOR": "1", "LOADLINT_CACHE_DIR": None}
CASES = ["examples"] + sorted(p.name for p in PROJECTS.iterdir() if p.is_dir())


def run(folder: Path, command: str, *args: str) -> tuple[str, int]:
    old = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(
            cli,
            [command, "--isolated", "--select", "ALL", "--target", TARGET, "--output-format", "concise", *args, "."],
            env=ENV,
            catch_exceptions=False,
        )
    finally:
        os.chdir(old)
    return result.output, result.exit_code


def copy_of(case: str, tmp_path: Path) -> Path:
    folder = tmp_path / case
    shutil.copytree(ROOT / "examples" if case == "examples" else PROJECTS / case, folder)
    (folder / "pyproject.toml").touch()
    return folder


def findings(output: str) -> list[str]:
    return [line for line in output.splitlines() if ": LL" in line]


@pytest.mark.parametrize("unsafe", [[], ["--unsafe-fixes"]], ids=["safe", "unsafe"])
@pytest.mark.parametrize("case", CASES)
def test_fix_then_fix_and_check_agree(case: str, unsafe: list[str], tmp_path: Path) -> None:
    folder = copy_of(case, tmp_path)
    first, first_code = run(folder, "fix", "--no-cache", *unsafe)
    again, again_code = run(folder, "fix", "--no-cache", *unsafe)
    checked, checked_code = run(folder, "check", "--no-cache", *unsafe)
    assert findings(again) == findings(checked) == findings(first)
    assert again_code == checked_code == first_code
    # Nothing left to do: the second run changed nothing and says so as check does.
    assert again == checked


def test_fix_applies_project_fixes_in_whatever_module(tmp_path: Path) -> None:
    folder = copy_of("examples", tmp_path) / "modular"
    check_out, check_code = run(folder, "check", "--no-cache")
    assert "data_setup.py:39:20: LL204 [*]" in check_out and "engine.py:10:26: LL205 [*]" in check_out
    assert "[*] 6 fixable with the `--fix` option." in check_out or "6 fixable" in check_out
    out, code = run(folder, "fix", "--no-cache")
    assert (out.splitlines()[-2:], code) == ([
        "Found 7 problems (6 fixed, 1 remaining: 1 error, 0 warnings).",
        # LL013's guard of train.py, a project finding, is unsafe.
        "No safe fixes available (1 unsafe fix available with --unsafe-fixes).",
    ], 1)
    assert findings(out) == [line for line in findings(check_out) if "LL013" in line]
    engine = (folder / "engine.py").read_text()
    assert "images.to(device, non_blocking=True), labels.to(device, non_blocking=True)" in engine
    # Another caller may pass 0 workers: persistent only when there are some.
    assert (folder / "data_setup.py").read_text().count("persistent_workers=num_workers > 0") == 2
    # The cached run agrees with the uncached one.
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert run(folder, "fix", *cache) == run(folder, "check", "--no-cache")


PINNED_ELSEWHERE = {
    "data.py": """\
from torch.utils.data import DataLoader


def build(ds):
    return DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True)
""",
    "steps.py": """\
import torch


def run(model, loader):
    for x, y in loader:
        model(x.cuda(), y.to("cuda"))
""",
    "train.py": """\
import data
import steps


def main():
    steps.run(model, data.build(ds))


if __name__ == "__main__":
    main()
""",
}


def write_project(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").touch()
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_a_fix_and_the_fixes_it_implies_apply_in_one_run(tmp_path: Path) -> None:
    root = write_project(tmp_path, PINNED_ELSEWHERE)
    out, code = run(root, "fix", "--no-cache", "--show-fixes")
    # pin_memory=True in data.py, then non_blocking=True at both transfers in steps.py.
    assert code == 0 and "Found 3 problems (3 fixed, 0 remaining)." in out
    assert "1 × LL202" in out and "2 × LL205" in out
    assert "pin_memory=True" in (root / "data.py").read_text()
    assert 'model(x.cuda(non_blocking=True), y.to("cuda", non_blocking=True))' in (root / "steps.py").read_text()
    assert run(root, "check", "--no-cache") == ("All checks passed!\n", 0)


def test_pinning_in_a_cpu_only_module_ends_where_check_agrees(tmp_path: Path) -> None:
    files = dict(PINNED_ELSEWHERE)
    # The factory's module only ever uses the CPU: its own LL208 then pins only when CUDA is there.
    files["data.py"] = files["data.py"].replace(
        "from torch.utils.data import DataLoader\n",
        "from torch.utils.data import DataLoader\n\n\ndef to_host(model):\n    return model.to(\"cpu\")\n",
    )
    root = write_project(tmp_path, files)
    out, code = run(root, "fix", "--no-cache")
    assert "pin_memory=torch.cuda.is_available()" in (root / "data.py").read_text()
    assert (findings(out), code) == (findings(run(root, "check", "--no-cache")[0]), 0)
    assert run(root, "fix", "--no-cache") == run(root, "check", "--no-cache")


def test_a_project_fix_that_would_introduce_a_finding_is_withheld(tmp_path: Path) -> None:
    from loadlint.engine.pipeline import ProfileCache, options_for
    from loadlint.workspace.config import Settings
    from loadlint.project.fixing import decide
    from loadlint.engine.summaries import numbered
    from loadlint.types import Finding, Location

    text = (
        "from torch.utils.data import BatchSampler, DataLoader, SequentialSampler\n"
        "batches = BatchSampler(SequentialSampler(ds), batch_size=4, drop_last=False)\n"
        "loader = DataLoader(ds, batch_sampler=batches, num_workers=2)\n"
    )
    path = str(tmp_path / "data.py")
    options = options_for(Settings(), path, ProfileCache())
    # Setting a batch size beside a batch sampler is LL004, which has no fix.
    keywords = {"batch_size": "4"}

    def decided(text: str) -> Finding:
        found = numbered(text)
        assert found is not None
        positions, nodes = found
        ref = next(i for i, node in enumerate(nodes) if positions.range(node)[0] == Location(3, 10))
        finding = Finding("LL202", "missing-pin-memory", "m", path, Location(3, 10), Location(3, 20))
        change = (ref, keywords, "safe", "Set `batch_size=4`")
        decide({path: [finding]}, {(path, "LL202", 3, 10): change}, lambda p: text, lambda p: options)
        return finding

    withheld = decided(text)
    assert withheld.fix is None and withheld.fix_withheld is not None
    assert withheld.fix_withheld.startswith("no fix: set `batch_size=4` would introduce LL004")
    # The same change on a loader it does not harm is offered.
    offered = decided(text.replace("batch_sampler=batches, ", ""))
    assert offered.fix is not None and offered.fix_withheld is None
    assert offered.fix.edits[0].content == "DataLoader(ds, num_workers=2, batch_size=4)"


def test_an_in_memory_dataset_from_another_module_is_left_alone(tmp_path: Path) -> None:
    folder = copy_of("in_memory_elsewhere", tmp_path)
    checked, _ = run(folder, "check", "--no-cache")
    assert [line.split(" ")[0:2] for line in findings(checked) if "LL201" in line] == [["train.py:12:12:", "LL201"]]
    run(folder, "fix", "--no-cache")
    train = (folder / "train.py").read_text()
    assert "DataLoader(RandomDataset(32, 64), batch_size=2, pin_memory=True)" in train
    assert "DataLoader(ds, batch_size=2, pin_memory=True)" in train
    assert "DataLoader(FileDataset(root), batch_size=2, num_workers=2, pin_memory=True)" in train


def test_the_cache_keeps_what_the_project_takes_back(tmp_path: Path) -> None:
    folder = copy_of("in_memory_elsewhere", tmp_path)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    cold = run(folder, "check", *cache)
    assert run(folder, "check", *cache) == cold == run(folder, "check", "--no-cache")
    # Made not in memory, the class no longer takes the finding back.
    module = folder / "helpers" / "datasets.py"
    module.write_text(module.read_text().replace("return self.data[index]", "return torch.load(self.data[index])"))
    assert sum("LL201" in line for line in findings(run(folder, "check", *cache)[0])) == 3


def test_the_cache_keeps_what_the_project_holds_back_and_takes_back_by_kind(tmp_path: Path) -> None:
    import json

    for case, kind in (("workers_would_crash", "held"), ("in_memory_elsewhere", "withdrawn")):
        folder = copy_of(case, tmp_path / case)
        cache = ["--cache-dir", str(tmp_path / case / "cache"), "--output-format", "json"]
        cold = run(folder, "check", *cache)
        assert run(folder, "check", *cache) == cold == run(folder, "check", "--no-cache", "--output-format", "json")
        [entry] = (tmp_path / case / "cache").rglob("project-*.pjson")
        stored = json.loads(entry.read_text())["findings"]
        # Each kind under its own name, keyed by the file's real path.
        assert sorted(stored) == ["findings", "held", "withdrawn"]
        assert stored[kind] and all(os.path.isfile(path) for found in stored.values() for path in found)


def test_a_fix_adding_workers_that_would_crash_elsewhere_is_withheld(tmp_path: Path) -> None:
    import json

    folder = copy_of("workers_would_crash", tmp_path)
    checked, _ = run(folder, "check", "--no-cache", "--output-format", "json")
    ll201 = {Path(f["filename"]).name: f for f in json.loads(checked) if f["code"] == "LL201"}
    assert ll201["evaluate.py"]["fix"] is None
    assert ll201["evaluate.py"]["fix_withheld"].startswith(
        "no fix: adding workers would introduce LL013 (missing-main-guard) at evaluate.py:14: this call reaches"
    )
    assert ll201["guarded.py"]["fix"] is not None
    run(folder, "fix", "--no-cache")
    # Pinned (LL202's fix), but no workers.
    assert "DataLoader(dataset, batch_size=8, pin_memory=True)" in (folder / "evaluate.py").read_text()
    assert "num_workers=" in (folder / "guarded.py").read_text()
    assert "LL013" not in run(folder, "check", "--no-cache")[0]


def test_workers_are_not_added_where_another_modules_dataset_keeps_a_handle(tmp_path: Path) -> None:
    import json

    folder = copy_of("handle_elsewhere", tmp_path)
    checked, _ = run(folder, "check", "--no-cache", "--output-format", "json")
    ll201 = {f["location"]["row"]: f for f in json.loads(checked) if f["code"] == "LL201"}
    assert ll201[10]["fix"] is None
    assert ll201[10]["fix_withheld"] == (
        "no fix: `Frames` (`frames.py`) holds an `lmdb` environment that spawned workers cannot receive "
        "(Python 3.14 on Linux starts workers with forkserver); open it in the worker first (LL014)"
    )
    assert ll201[11]["fix"] is not None
    run(folder, "fix", "--no-cache")
    train = (folder / "train.py").read_text()
    assert "DataLoader(Frames(path), batch_size=8, pin_memory=True)" in train
    assert "DataLoader(Images(paths), batch_size=8, pin_memory=True, num_workers=7, persistent_workers=True)" in train
    # Only the loader whose workers were written by hand: the fix started none over Frames.
    assert [line.split(" ")[0] for line in findings(run(folder, "check", "--no-cache")[0]) if " LL014 " in line] == [
        "evaluate.py:13:14:"
    ]


def test_a_project_fix_is_not_written_to_a_file_changed_since(tmp_path: Path) -> None:
    from loadlint.api import check_paths
    from loadlint.workspace.config import Overrides
    from loadlint.hardware.detect import parse_target
    from loadlint.project.fixing import write

    root = write_project(tmp_path, {**PINNED_ELSEWHERE, "data.py": PINNED_ELSEWHERE["data.py"].replace(
        "persistent_workers=True)", "persistent_workers=True, pin_memory=True)")})
    run_ = check_paths([root], Overrides(target=parse_target(TARGET)), isolated=True)
    assert [f.code for f in run_.findings if f.fix is not None] == ["LL205", "LL205"]
    steps = root / "steps.py"
    # As the run's project phase read the files.
    read_as = {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.glob("*.py")}
    changed = "# a line more: every offset moves\n" + steps.read_text()
    steps.write_text(changed)
    assert write(run_.results, False, read_as) is False
    assert steps.read_text() == changed
    # Without a record of the file as read (another run's table is not this one's): not written either.
    steps.write_text(PINNED_ELSEWHERE["steps.py"])
    assert write(run_.results, False, {}) is False
    assert steps.read_text() == PINNED_ELSEWHERE["steps.py"]
    # As read, it is: the fixes are made from these bytes.
    read_as = {str(steps): (steps.stat().st_size, steps.stat().st_mtime_ns)}
    assert write(run_.results, False, read_as) is True
    assert 'model(x.cuda(non_blocking=True), y.to("cuda", non_blocking=True))' in steps.read_text()


def _snapshot(folder: Path) -> dict[str, str]:
    """Each module's text; each notebook code cell's source (as ``--diff`` shows them)."""
    import json

    files = {p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*.py"))}
    for p in sorted(folder.rglob("*.ipynb")):
        cells = json.loads(p.read_text(encoding="utf-8"))["cells"]
        for index, cell in enumerate(cells, 1):
            if cell["cell_type"] == "code":
                files[f"{p.relative_to(folder).as_posix()}:cell {index}"] = "".join(cell["source"])
    return files


@pytest.mark.parametrize("unsafe", [[], ["--unsafe-fixes"]], ids=["safe", "unsafe"])
@pytest.mark.parametrize("case", CASES)
def test_diff_shows_what_fix_writes_project_fixes_included(case: str, unsafe: list[str], tmp_path: Path) -> None:
    import difflib

    folder = copy_of(case, tmp_path)
    before = _snapshot(folder)
    shown, shown_code = run(folder, "fix", "--diff", "--no-cache", *unsafe)
    assert _snapshot(folder) == before  # a dry run writes nothing
    run(folder, "fix", "--no-cache", *unsafe)
    after = _snapshot(folder)
    written = "".join(
        "".join(difflib.unified_diff(before[name].splitlines(keepends=True), after[name].splitlines(keepends=True),
                                     f"a/{name}", f"b/{name}"))
        for name in sorted(before) if after[name] != before[name]
    )
    diff_lines = [line for line in shown.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    written_lines = [line for line in written.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert diff_lines == written_lines
    assert shown_code == (1 if written else 0)


def test_a_notebooks_project_findings_are_fixed_in_their_cell(tmp_path: Path) -> None:
    import json

    folder = copy_of("notebook_factory", tmp_path)
    before = json.loads((folder / "course.ipynb").read_text(encoding="utf-8"))
    out, code = run(folder, "fix", "--no-cache")
    assert (out, code) == ("Found 2 problems (2 fixed, 0 remaining).\n", 0)
    after = json.loads((folder / "course.ipynb").read_text(encoding="utf-8"))
    assert after["cells"][2]["source"][2] == "        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n"
    # Only that line: the magic, the other cells and the notebook's metadata stay.
    after["cells"][2]["source"][2] = before["cells"][2]["source"][2]
    assert after == before
    assert run(folder, "check", "--no-cache") == ("All checks passed!\n", 0)
