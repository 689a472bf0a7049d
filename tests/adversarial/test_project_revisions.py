"""A rule's revisions of its own findings across files (``Rule.revise_own``)
come from summaries a cache may hold from another run, and from the rule:
what does not name a node of a run's file changes nothing, and a malformed
list of in-memory classes reads as none."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest
from click.testing import CliRunner

import loadlint.project as project
import loadlint.project.handles as handles
from loadlint.frontends.cli import cli
from loadlint.project.handles import imported_loaders
from loadlint.project.modules import ModuleResolver
from loadlint.rules import rule_class
from loadlint.rules.project_context import HoldFix, ProjectContext, Revision, TakeBack

TARGET = "cpus=8,gpus=1,memory=64,shm=16,platform=linux,python=3.14"


@pytest.mark.parametrize("listed", [5, "Numbers", {"Numbers": 1}, None, ["Other"]])
def test_a_malformed_list_of_in_memory_classes_reads_as_none(tmp_path: Path, listed: object) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "data.py").write_text("")
    summary = {"version": 0, "imports": {}, "functions": {}, "flags": {},
               "imported_datasets": [{"at": 1, "class": "data.Numbers", "workers": 0}]}
    data = {"version": 0, "imports": {}, "functions": {}, "flags": {}, "in_memory_classes": listed}
    found = imported_loaders(str(tmp_path / "train.py"), summary, lambda path: data, ModuleResolver(tmp_path))  # type: ignore[arg-type]
    assert [(f.at, f.in_memory) for f in found] == [(1, False)]


TRAIN = """\
from torch.utils.data import DataLoader
from data import Numbers


def main():
    loader = DataLoader(Numbers())
    for epoch in range(3):
        for batch in loader:
            pass


if __name__ == "__main__":
    main()
"""


class Stray:
    """Revisions that name no finding of a run's file."""

    code = "LL201"

    def __init__(self, elsewhere: str) -> None:
        self.elsewhere = elsewhere

    def revise_own(self, project: ProjectContext) -> Iterator[Revision]:
        for loader in project.imported:
            yield TakeBack(loader.path, 10**6)  # no such node
            yield HoldFix(loader.path, -1, "no fix: nowhere")
            yield TakeBack(self.elsewhere, loader.at)  # not the file asked about
        yield HoldFix(self.elsewhere, 3, "no fix: another file")
        yield TakeBack(self.elsewhere, 3)


def test_revisions_that_name_no_node_of_a_run_file_change_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "data.py").write_text("import torch\n\n\nclass Numbers(torch.utils.data.Dataset):\n    pass\n")
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "other.py").write_text("x = 1\n")

    def run() -> tuple[int, str]:
        old = os.getcwd()
        os.chdir(tmp_path)
        try:
            args = ["check", "--isolated", "--no-cache", "--select", "LL201", "--target", TARGET, "--output-format",
                    "full", "train.py"]
            result = CliRunner().invoke(cli, args, env={"NO_COLOR": "1"}, catch_exceptions=False)
            return result.exit_code, result.output
        finally:
            os.chdir(old)

    before = run()
    assert before[0] == 1 and before[1].startswith("train.py:6:14: LL201 [*] `num_workers` is not set")
    stray = (Stray(str(tmp_path / "other.py")),)
    monkeypatch.setattr(handles, "revising_rules", lambda: stray)
    monkeypatch.setattr(project, "revising_rules", lambda: stray + (rule_class("LL013")(),))
    assert run() == before
