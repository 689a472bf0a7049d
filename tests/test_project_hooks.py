"""A rule's cross-file half is its ``check_project`` hook: the project
analysis hands it typed views of what it joined and places what it reports."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest
from click.testing import CliRunner

import loadlint.project.reporter as reporter
from loadlint.frontends.cli import cli
from loadlint.rules import rule_class
from loadlint.rules.base import Context, Report, Rule
from loadlint.rules.project_context import (
    ABSENT, BuiltLoader, HoldFix, ImportedLoader, ModuleFlags, ProjectContext, ProjectReport, Revision, Setting,
    TakeBack, WouldIntroduce,
)

LOADLINT = Path(__file__).parents[1] / "loadlint"
TARGET = "cpus=8,gpus=1,memory=64,shm=16,platform=linux,python=3.14"

TRAIN = """\
from torch.utils.data import DataLoader
from engine import run


def main():
    run(DataLoader(range(8), num_workers=2))
    run(DataLoader(range(8)))
"""
ENGINE = """\
def run(loader):
    for epoch in range(3):
        for batch in loader:
            pass
"""


class Recorder(Rule):
    """Reports where each loader is iterated in another function, and records each call."""

    code, name, category, summary = "LL204", "non-persistent-workers", "performance", "records its calls"
    project_hazard = 1

    def __init__(self) -> None:
        self.calls: list[tuple[int, bool]] = []

    def check(self, ctx: Context) -> Iterator[Report]:
        return iter(())

    def check_project(self, project: ProjectContext) -> Iterator[ProjectReport]:
        self.calls.append((len(project.loaders), project.what_if))
        for flow in project.loaders:
            for use in flow.uses:
                if not use.here and use.kind == "iter":
                    pinned = "absent" if not flow.setting("pin_memory").written else "written"
                    yield ProjectReport(use.path, use.at, f"{flow.workers} workers, pin_memory {pinned}, by {use.function}")


def _check(folder: Path) -> str:
    old = os.getcwd()
    os.chdir(folder)
    try:
        args = ["check", "--isolated", "--no-cache", "--select", "LL204", "--target", TARGET, "--output-format",
                "concise", "-q", "."]
        return CliRunner().invoke(cli, args, env={"NO_COLOR": "1"}, catch_exceptions=False).output
    finally:
        os.chdir(old)


def test_the_hook_gets_each_loader_then_the_rest_and_its_reports_become_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "engine.py").write_text(ENGINE)
    rule = Recorder()
    monkeypatch.setattr(reporter, "project_rules", lambda: (rule,))
    # Both loaders are iterated at the same place: the first report there is kept.
    assert _check(tmp_path) == "engine.py:3:22: LL204 2 workers, pin_memory absent, by run\n"
    # One call per loader; the loader without workers once more as if the
    # fix had added them (the rule is a project hazard); then the rest.
    assert rule.calls == [(1, False), (1, False), (1, True), (0, False)]


def test_a_hook_that_no_file_selects_is_not_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "engine.py").write_text(ENGINE)
    rule = Recorder()
    rule.code = "LL207"  # not selected: asked only what a fix adding workers would introduce
    monkeypatch.setattr(reporter, "project_rules", lambda: (rule,))
    assert _check(tmp_path) == ""
    assert rule.calls == [(1, True)]


def test_a_setting_reads_what_the_summary_says() -> None:
    assert Setting.of({"value": False}).is_(False) and not Setting.of({"value": 0}).is_(False)
    assert Setting.of({"param": "workers"}) == Setting(True)  # written, value unknown
    assert Setting.of({"cpu_count": True, "note": "`config.N` from config.py:1"}) == Setting(
        True, False, None, True, "`config.N` from config.py:1")
    assert not ABSENT.written and not ABSENT.is_(None)
    built = BuiltLoader.of("a.py", {"at": 3, "kw": {"num_workers": "n"}, "values": {"num_workers": {"param": "n"}}, "var": None})
    assert (built.at, dict(built.passed), built.setting("num_workers"), built.setting("pin_memory")) == (
        3, {"num_workers": "n"}, Setting(True), ABSENT)


#: A phrase of each cross-file rule's message, and the one module that words it.
MESSAGES = {
    "of a pinned batch without `non_blocking=True`": "ll205_blocking_transfer.py",
    "but batches go to the GPU: copies from pageable memory": "ll202_missing_pin_memory.py",
    "shuffles with the same seed every epoch": "ll102_missing_set_epoch.py",
    "creates a new iterator on every pass": "ll207_iterator_recreated.py",
    "are started again at every epoch": "ll204_non_persistent_workers.py",
    "every worker re-imports this script": "ll013_missing_main_guard.py",
    "stores {handle['what']} on the dataset": "ll014_unpicklable_dataset_handle.py",
    "no fix: adding workers would introduce": "ll201_synchronous_loading.py",
    "imports this module, and under": "ll013_missing_main_guard.py",
}


@pytest.mark.parametrize("phrase", sorted(MESSAGES))
def test_each_message_is_written_once_in_its_rules_module(phrase: str) -> None:
    # The examples quote the messages they expect: not where they are written.
    found = sorted(
        path.name for path in LOADLINT.rglob("*.py")
        if "examples" not in path.parts and phrase in path.read_text(encoding="utf-8")
    )
    assert found == [MESSAGES[phrase]]


#: Copies of a pinned loader's batch, and whether LL205 reports each.
COPIES = {
    "x.cuda()": True,
    'x.to("cuda")': True,
    "x.type(torch.cuda.FloatTensor)": True,
    "x.type(dtype=torch.cuda.HalfTensor)": True,
    "x.cuda(non_blocking=True)": False,
    "x.type(torch.cuda.FloatTensor, non_blocking=True)": False,
    'x.to("cpu")': False,
    "x.type(torch.FloatTensor)": False,
    "x.pin_memory()": False,
}


@pytest.mark.parametrize("copy", sorted(COPIES))
def test_ll205_reads_one_blocking_copy_test_in_the_loaders_function_and_in_another_module(
    tmp_path: Path, copy: str
) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    loop = f"    for x in loader:\n        y = {copy}\n"
    (tmp_path / "steps.py").write_text(f"import torch\n\n\ndef run(loader):\n{loop}")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom torch.utils.data import DataLoader\nfrom steps import run\n\n"
        "loader = DataLoader(range(8), num_workers=2, pin_memory=True, persistent_workers=True)\n"
        f"for x in loader:\n    y = {copy}\nrun(loader)\n"
    )
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        args = ["check", "--isolated", "--no-cache", "--select", "LL205", "--target", TARGET, "--output-format",
                "concise", "-q", "."]
        out = CliRunner().invoke(cli, args, env={"NO_COLOR": "1"}, catch_exceptions=False).output
    finally:
        os.chdir(old)
    method = copy.split("(")[0].split(".")[1]
    text = (f"LL205 [*] `.{method}()` of a pinned batch without `non_blocking=True`: the copy blocks and cannot "
            "overlap compute, so pinning buys nothing; pass `non_blocking=True`")
    expected = f"steps.py:6:13: {text} (the loader is built at train.py:5)\ntrain.py:7:9: {text}\n"
    assert out == (expected if COPIES[copy] else "")


class Joined:
    """A project context with only what ``revise_own`` reads."""

    def __init__(self, **given: object) -> None:
        self.imported = given.get("imported", ())
        self.loaders = given.get("loaders", ())
        self.introduced = given.get("introduced", ())
        self.summarised = given.get("summarised", ())
        self.reported = given.get("reported", frozenset())
        self.flags = given.get("flags", {})
        self.importers = given.get("importers", {})
        self.asked: list[list[str]] = []

    def module(self, path: str) -> ModuleFlags:
        return ModuleFlags(False, False, False, False, frozenset(), path in self.flags)

    def importers_of(self, paths):
        self.asked.append(list(paths))
        return {path: by for path, by in self.importers.items() if path in paths}


def _imported(at: int, in_memory: bool) -> ImportedLoader:
    return ImportedLoader("/p/train.py", at, None, None, frozenset(), "/p/data.py", None, in_memory)


def test_ll201_takes_back_a_loader_over_another_modules_in_memory_class_and_words_the_held_fix() -> None:
    rule = rule_class("LL201")()
    joined = Joined(imported=[_imported(3, True), _imported(7, False)])
    assert list(rule.revise_own(joined)) == [TakeBack("/p/train.py", 3)]
    would = WouldIntroduce("/p/train.py", 5, "LL207", "iterator-recreated", "engine.py:4", "a message")
    assert list(rule.revise_own(Joined(introduced=[would]))) == [HoldFix(
        "/p/train.py", 5, "no fix: adding workers would introduce LL207 (iterator-recreated) at engine.py:4: a message")]


class _Flow:
    """A loader as one walk built it: only what LL201's revision reads."""

    def __init__(self, at: int, dataset_in_memory: bool | None) -> None:
        self.built = BuiltLoader("/p/metrics.py", at, {}, {})
        self.dataset_in_memory = dataset_in_memory


def test_ll201_takes_back_a_parameter_dataset_only_when_every_caller_passes_tensors() -> None:
    rule = rule_class("LL201")()
    flows = [_Flow(3, True), _Flow(3, True), _Flow(9, True), _Flow(9, False), _Flow(12, None), _Flow(15, True),
             _Flow(15, None)]
    # 9: one caller passes something else; 12: no parameter dataset; 15: a walk without a caller says nothing.
    assert list(rule.revise_own(Joined(loaders=flows))) == [TakeBack("/p/metrics.py", 3), TakeBack("/p/metrics.py", 15)]


def test_ll013_withholds_its_guard_in_every_imported_script_it_or_its_hook_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/")
    rule = rule_class("LL013")()
    joined = Joined(summarised=["/p/a.py", "/p/b.py", "/p/c.py"], flags={"/p/a.py"}, reported=frozenset({"/p/c.py"}),
                    importers={"/p/a.py": "/p/eval.py", "/p/b.py": "/p/x.py", "/p/c.py": "/p/y.py"})
    reason = ("no fix: `{}` imports this module, and under `if __name__ == \"__main__\":` the code it runs on import "
              "would no longer run there; move that code into a function instead")
    assert list(rule.revise_own(joined)) == [
        HoldFix("/p/a.py", None, reason.format("p/eval.py")), HoldFix("/p/c.py", None, reason.format("p/y.py"))]
    # Only the scripts (a module-level start, or the hook's finding) are searched for importers.
    assert joined.asked == [["/p/a.py", "/p/c.py"]]


TAKEN_BACK = """\
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


def test_the_project_places_a_rules_revisions_whatever_its_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The drivers know no code: a rule's TakeBack removes its own finding
    and a HoldFix withholds its fix with the rule's reason."""
    import loadlint.project as project
    import loadlint.project.handles as handles

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "data.py").write_text("import torch\n\n\nclass Numbers(torch.utils.data.Dataset):\n    pass\n")
    (tmp_path / "train.py").write_text(TAKEN_BACK)

    class Reviser(Rule):
        code, name, category, summary = "LL201", "synchronous-loading", "performance", "revises"
        verdict: type = TakeBack

        def check(self, ctx: Context) -> Iterator[Report]:
            return iter(())

        def revise_own(self, project: ProjectContext) -> Iterator[Revision]:
            for loader in project.imported:
                yield TakeBack(loader.path, loader.at) if self.verdict is TakeBack else HoldFix(loader.path, loader.at, "no fix: a reason")

    def run(*extra: str) -> str:
        old = os.getcwd()
        os.chdir(tmp_path)
        try:
            args = ["check", "--isolated", "--no-cache", "--select", "LL201", "--target", TARGET, "--output-format",
                    "concise", *extra, "."]
            return CliRunner().invoke(cli, args, env={"NO_COLOR": "1"}, catch_exceptions=False).output
        finally:
            os.chdir(old)

    shown = run("-q")
    assert shown.startswith("train.py:6:14: LL201 [*] `num_workers` is not set") and shown.count("\n") == 1
    rule = Reviser()
    monkeypatch.setattr(handles, "revising_rules", lambda: (rule,))
    monkeypatch.setattr(project, "revising_rules", lambda: ())
    assert run("-q") == ""
    rule.verdict = HoldFix
    held = run("--output-format", "full")
    assert held.startswith("train.py:6:14: LL201 `num_workers` is not set") and "  = help: no fix: a reason\n" in held
