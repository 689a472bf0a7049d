"""What one run keeps is its own: a dry run's staged writes and a fix's
record of the files as read live and die with the run, so runs in one
process (the language server's, over many saves) neither see each other's
nor grow the process's state."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from loadlint.engine.pipeline import ProfileCache
from loadlint.frontends.lsp.worker import fixed_in_project, project_findings
from loadlint.hardware.detect import parse_target
from loadlint.run.runner import lint_candidates
from loadlint.types import FileResult, FixRequest
from loadlint.workspace.config import Overrides, ConfigResolver
from loadlint.workspace.discover import Candidate

TARGET = "cpus=8,gpus=1,memory=64,shm=16,platform=linux,python=3.14"
#: A loader pinned in one module, its batches moved in another: the fix
#: pins it (round 1), then makes the moves non-blocking (round 2).
PROJECT = {
    "data.py": "from torch.utils.data import DataLoader\n\n\n"
    "def build(ds):\n    return DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True)\n",
    "steps.py": "import torch\n\n\ndef run(model, loader):\n    for x, y in loader:\n        model(x.cuda(), y.to(\"cuda\"))\n",
    "train.py": "import data\nimport steps\n\n\ndef main():\n    steps.run(model, data.build(ds))\n\n\n"
    "if __name__ == \"__main__\":\n    main()\n",
}


def write_project(folder: Path, pinned: bool = False) -> Path:
    folder.mkdir()
    (folder / "pyproject.toml").touch()
    for name, text in PROJECT.items():
        if pinned:
            text = text.replace("persistent_workers=True)", "persistent_workers=True, pin_memory=True)")
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def dry_run(root: Path) -> dict[str, str | None]:
    resolver = ConfigResolver(Overrides(target=parse_target(TARGET)))
    candidates = [Candidate(path, resolver.for_path(path), True) for path in sorted(root.glob("*.py"))]
    run = lint_candidates(candidates, FixRequest(unsafe=False, dry_run=True), jobs=1)
    return {Path(r.path).name: r.fixed for r in run.results}


def check(root: Path) -> list[tuple[str, str]]:
    resolver = ConfigResolver(Overrides(target=parse_target(TARGET)))
    candidates = [Candidate(path, resolver.for_path(path), True) for path in sorted(root.glob("*.py"))]
    return [(Path(f.path).name, f.code) for f in lint_candidates(candidates, jobs=1).findings]


def test_runs_inside_a_dry_run_see_the_disk_and_leave_its_diff_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = write_project(tmp_path / "first"), write_project(tmp_path / "second")
    alone, checked = dry_run(first), check(first)
    assert ("data.py", "LL202") in checked
    assert alone["data.py"] is not None and "pin_memory=True" in alone["data.py"]
    assert alone["steps.py"] is not None and "non_blocking=True" in alone["steps.py"]
    import loadlint.project.join as join

    original = join.join_project
    calls: list[None] = []
    inner: list[object] = []

    def join_then_run_another(candidates: list[Candidate], results: list[FileResult | None], *args: object, **kwargs: object) -> None:
        # The check, the first round, then the second, on the first round's
        # staged writes: another whole run there.
        calls.append(None)
        if len(calls) == 3:
            monkeypatch.setattr(join, "join_project", original)
            inner.extend([check(first), dry_run(second)])
            monkeypatch.setattr(join, "join_project", join_then_run_another)
        original(candidates, results, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(join, "join_project", join_then_run_another)
    outer = dry_run(first)
    # The check reads the disk, not the dry run's staged pinning.
    assert inner == [checked, alone]
    assert outer == alone
    # Nothing was written.
    assert {p.name: p.read_text() for p in sorted(first.glob("*.py"))} == PROJECT


def _state() -> dict[str, int]:
    """The size of every container the modules of a run (the project
    phase, the runner, the reads and writes) hold at their top level."""
    sizes = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith(("loadlint.project", "loadlint.sources.files", "loadlint.run")):
            continue
        for attr, value in vars(module).items():
            if isinstance(value, (dict, list, set)) and not attr.startswith("__"):
                sizes[f"{name}.{attr}"] = len(value)
    return sizes


def test_language_server_saves_keep_nothing_of_earlier_runs(tmp_path: Path) -> None:
    resolver = ConfigResolver(Overrides(target=parse_target(TARGET)))
    profiles = ProfileCache()

    def save(folder: Path) -> None:
        path = str(write_project(folder, pinned=True) / "steps.py")
        settings = resolver.for_path(Path(path))
        assert [f.code for f in project_findings(path, settings, profiles)] == ["LL205", "LL205"]
        fixed = fixed_in_project(path, settings, profiles)
        assert fixed is not None and "non_blocking=True" in fixed

    save(tmp_path / "p0")
    before = _state()
    for count in range(1, 4):
        save(tmp_path / f"p{count}")
    assert _state() == before
