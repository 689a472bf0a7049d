"""Phase 2's findings: the driver of the rules' project hooks.

Each loader of the walk (``flow``) is handed, as a typed view
(``context``), to every rule that defines ``Rule.check_project``; then the
rest of the project (the Lightning Trainers that ``lightning`` joins).  The
rules decide and word their findings; here they are placed where the user
edits, once per place and code, and a finding the file's own rules already
make on the same line is not repeated.  A loader's factory entered with
its caller's values is analysed again with them bound (every single-file
rule applies unchanged).
"""

from __future__ import annotations

import dataclasses
import json
import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

from loadlint.engine.analysis import Bindings, analyse
from loadlint.engine.suppress import file_suppressions, suppressed_codes
from loadlint.project.budget import Budget, unfinished_message
from loadlint.project.context import Locator, LoaderView, Shared, View
from loadlint.project.flow import MISSING_VALUE, Frame, LoaderRef, Value
from loadlint.rules import codes_where, name_of, project_rules
# The fixes a hook asks for; ``fixing`` reads them from here.
from loadlint.rules.project_context import Change as Change, Guard as Guard
from loadlint.rules.project_context import LightningClass, TrainerRun, WouldIntroduce
from loadlint.types import Descriptor, Finding, Flags, Options
from loadlint.workspace.config import is_test_file

if TYPE_CHECKING:
    from loadlint.rules.base import Rule

NOTEBOOK = ".ipynb"


#: The codes a test file leaves out (``performance_in_tests``).
_TRAINING_CODES = codes_where(in_tests=False)


class Source(Protocol):
    """What the reporter reads from the project (``loadlint.project.Project``)."""

    @property
    def root(self) -> Path: ...

    @property
    def read_text(self) -> Callable[[str], str | None]: ...

    @property
    def file_options(self) -> Callable[[str], Options]: ...

    @property
    def own_findings(self) -> Callable[[str], list[Finding] | None]: ...

    @property
    def codes(self) -> frozenset[str] | None: ...

    def mentions(self, word: bytes) -> bool: ...


def show(value: Value) -> str:
    """A value as a message shows it (``?`` when unknown)."""
    if isinstance(value, dict):
        if "value" in value:
            return repr(value["value"])
        if value.get("cpu_count"):
            return "cpu_count()"
        if value.get("lambda"):
            return "lambda ..."
    return "?"


def _workers(ref: LoaderRef) -> str | None:
    """The loader's worker count as the message shows it, when certainly > 0."""
    value = ref.setting("num_workers")
    if isinstance(value, dict):
        count = value.get("value")
        if type(count) is int and count > 0:
            return str(count)
        if value.get("cpu_count"):
            return "`os.cpu_count()`"
    return None


class Reporter:
    """Turns the walk's loaders into findings on the files asked for."""

    def __init__(
        self, project: Source, wanted: set[str], flags: Callable[[str], Flags], entered: list[Frame]
    ) -> None:
        self.project = project
        self.wanted = wanted
        #: A module's flags (``loadlint.facts.summary``): what its own rules see.
        self.flags = flags
        self.where = Locator(project.read_text)
        self.out: dict[str, list[Finding]] = {}
        self.seen: set[tuple[str, str, int, int, str]] = set()
        self.baselines: dict[str, set[tuple[str, int, int]]] = {}
        self.own: dict[str, set[tuple[str, int]]] = {}
        self.injected: set[tuple[str, str]] = set()
        self.reanalysed: dict[tuple[str, str], list[Finding]] = {}
        self.budget = Budget()
        #: A factory file's tree, parsed once for all its callers' values.
        self.trees: dict[str, Any] = {}
        #: The fix each finding asks for, by (path, code, row, column):
        #: (node ref, keywords to set, applicability, label); decided in ``fixing``.
        self.changes: dict[tuple[str, str, int, int], Change] = {}
        #: A loader whose file's fix would add workers, while its findings are tried.
        self.what_if: LoaderRef | None = None
        #: The script whose walk reached the loader being reported (``_options``).
        self.script: str | None = None
        #: (path, loader ref) -> (code, message, place) of the first finding such a fix would introduce.
        self.blocked: dict[tuple[str, int], tuple[str, str, str]] = {}
        #: The modules each walk (by its root frame) entered.
        self.reached: dict[int, set[str]] = {}
        for frame in entered:
            self.reached.setdefault(id(frame.root), set()).add(frame.path)
        self.shared = Shared(self.where, flags, project.mentions, lambda path: project.file_options(path).profile())

    @cached_property
    def selected(self) -> list[Rule]:
        """The rules with a project hook that some file selects."""
        codes = self.project.codes
        return [rule for rule in project_rules() if codes is None or rule.code in codes]

    @cached_property
    def hazards(self) -> list[Rule]:
        """The hooks asked what a fix adding workers would introduce, selected or not."""
        return sorted((rule for rule in project_rules() if rule.project_hazard), key=lambda rule: rule.project_hazard)

    def _add(self, path: str, code: str, ref: int, message: str, change: Change | None = None) -> None:
        if self.what_if is not None:
            self._would_add(path, code, ref, message, self.what_if)
            return
        if path not in self.wanted:
            return
        options = self.project.file_options(path)
        if code not in self._options(path).select:
            return
        span = self.where.span(path, ref)
        if span is None or (code, span[0].row) in self._own(path, options):
            return
        if change is not None:
            self.changes.setdefault((path, code, span[0].row, span[0].column), change)
        self._keep(Finding(code, name_of(code), message, path, span[0], span[1]))

    def _options(self, path: str) -> Options:
        """A file's options; a test file by its name (``test.py``) that a
        script's walk reaches is checked, for that walk, with the script's
        training codes: PyTorch-YOLOv3's ``test.py`` is the evaluation module
        ``train.py`` calls every epoch."""
        options = self.project.file_options(path)
        script = self.script
        if script is None or script == path or not self._is_test(path) or self._is_test(script):
            return options
        extra = self.project.file_options(script).select & _TRAINING_CODES - options.select
        return dataclasses.replace(options, select=options.select | extra) if extra else options

    def _is_test(self, path: str) -> bool:
        return is_test_file(os.path.relpath(path, self.project.root).replace(os.sep, "/"))

    def _would_add(self, path: str, code: str, ref: int, message: str, loader: LoaderRef) -> None:
        """Record, by the loader's place, the first finding its file's fix
        adding workers would introduce (anywhere in the project, selected or not)."""
        span = self.where.span(path, ref)
        if span is None or (code, span[0].row) in self._own(path, self.project.file_options(path)):
            return
        key = (loader.frame.path, int(loader.summary.get("at", -1)))
        self.blocked.setdefault(key, (code, message, self.where.place(path, ref)))

    def _own(self, path: str, options: Options) -> set[tuple[str, int]]:
        """(code, line) of the file's own findings: those it reports already."""
        if path not in self.own:
            found = self.project.own_findings(path)
            if found is None:
                text = self.project.read_text(path)
                found = analyse(text, path, options, notebook=path.endswith(NOTEBOOK))[0] if text is not None else []
            self.own[path] = {(f.code, f.location.row) for f in found}
        return self.own[path]

    def _keep(self, finding: Finding, call: str = "") -> None:
        """Once per place and code; per ``call`` (the values a factory's
        caller passes) too, so that callers passing different values each get
        their finding, naming them."""
        key = (finding.path, finding.code, finding.location.row, finding.location.column, call)
        if key in self.seen:
            return
        self.seen.add(key)
        self.out.setdefault(finding.path, []).append(finding)

    # -- the driver --------------------------------------------------------

    def loader(self, ref: LoaderRef) -> None:
        """One loader of the walk: its factory analysed again with the
        caller's values, then every hook on it."""
        self.script = ref.frame.root.path
        self._factory(ref)
        workers = _workers(ref)
        self._ask(View(self.shared, loaders=[LoaderView(ref, self.where, self._reached, workers)]))
        count = ref.setting("num_workers")
        if workers is None and (count is MISSING_VALUE or isinstance(count, dict) and count.get("value") == 0):
            # What the file's own fix adding workers (LL201) would make the
            # project report: such a finding withholds that fix.
            self.what_if = ref
            view = View(self.shared, loaders=[LoaderView(ref, self.where, self._reached, "the fix's")], what_if=True)
            for rule in self.hazards:
                for report in rule.check_project(view):
                    self._add(report.path, rule.code, report.at, report.message, report.change)
            self.what_if = None
        self.script = None

    def views(self, refs: list[LoaderRef]) -> list[LoaderView]:
        """Each loader as the walks built it, for ``Rule.revise_own``."""
        return [LoaderView(ref, self.where, self._reached, _workers(ref)) for ref in refs]

    def rest(self, trainers: Callable[[Callable[[LightningClass], bool]], Iterator[TrainerRun]]) -> None:
        """Every hook on what is joined beyond the walk's loaders: the GPU
        Trainers handed a class of another module (``lightning``)."""
        self._ask(View(self.shared, trainers=trainers))

    def _ask(self, view: View) -> None:
        for rule in self.selected:
            for report in rule.check_project(view):
                self._add(report.path, rule.code, report.at, report.message, report.change)

    def _reached(self, root: Frame) -> frozenset[str]:
        return frozenset(self.reached.get(id(root), ()))

    def _factory(self, ref: LoaderRef) -> None:
        """The factory's file analysed again with this call's values."""
        frame = ref.frame
        if frame.parent is None or frame.path not in self.wanted:
            return
        given: dict[str, Descriptor] = {}
        for param in sorted(set(ref.summary.get("kw", {}).values())):
            value = frame.env.get(param)
            # Only values the rules can use: an unknown default changes nothing.
            if isinstance(value, dict) and show(value) != "?":
                given[param] = value
        if not given:
            return
        sites = [(f.parent.path, f.site.get("at")) for f in frame.chain() if f.parent is not None and f.site is not None]
        key = (frame.path, json.dumps([frame.function, given, sites], sort_keys=True))
        if key in self.injected:
            return
        self.injected.add(key)
        options = self._options(frame.path)
        bindings = {frame.function: given}
        memo = (frame.path, json.dumps([bindings, sorted(options.select)], sort_keys=True))
        if memo not in self.reanalysed:
            why = self.budget.refusal(frame.path, frame.function)
            if why is not None:
                self.budget.skip(frame.path, why, self.where.span(frame.path, int(ref.summary.get("at", -1))))
                return
            self.reanalysed[memo] = self._reanalyse(frame.path, bindings, options)
        findings = [dataclasses.replace(f) for f in self.reanalysed[memo]]
        if findings:
            suffix = self._values(frame, given)
        # Callers passing the same values (or one call reached along a
        # longer chain) make one finding; other values make their own.
        call = json.dumps({param: show(value) for param, value in given.items()}, sort_keys=True)
        for finding in findings:
            finding.message += suffix
            finding.fix = None  # the fix would change the factory for every caller
            self._keep(finding, call)

    def _values(self, frame: Frame, given: dict[str, Descriptor]) -> str:
        """`` (with `workers=0` and the default `batch_size=32`; `f` called from train.py:5)``."""
        passed = [f"`{p}={show(v)}`" for p, v in given.items() if not v.get("default")]
        defaults = [f"`{p}={show(v)}`" for p, v in given.items() if v.get("default")]
        shown = passed + ([f"the default{'s' if len(defaults) > 1 else ''} " + ", ".join(defaults)] if defaults else [])
        notes = [str(v["note"]) for v in given.values() if v.get("note")]
        return f" (with {' and '.join(shown)}; " + "; ".join(notes + [f"`{frame.function}` {self.where.calls(frame)}"]) + ")"

    def _reanalyse(self, path: str, bindings: Bindings, options: Options) -> list[Finding]:
        text = self.project.read_text(path)
        if text is None:
            return []
        if path not in self.baselines:
            before = self.project.own_findings(path)
            if before is None:
                before, _ = analyse(text, path, options, notebook=path.endswith(NOTEBOOK))
            self.baselines[path] = {_sig(f) for f in before}
        tree = self.trees.get(path)
        after, analysis = analyse(text, path, options, bindings=bindings, notebook=path.endswith(NOTEBOOK), parsed=tree)
        if tree is None and analysis is not None:
            self.trees[path] = (analysis.module, analysis.positions.piece)
        # Where the file already reports the code at that spot (LL201 with
        # the default's value), a second copy with the caller's value would
        # only contradict it.
        return [f for f in after if _sig(f) not in self.baselines[path]]

    def introduced(self) -> list[WouldIntroduce]:
        """By loader, the first finding its file's fix adding workers would
        make the project report (``Rule.revise_own`` decides what that means)."""
        return [WouldIntroduce(path, at, code, name_of(code), place, message)
                for (path, at), (code, message, place) in sorted(self.blocked.items())]

    def unfinished(self) -> bool:
        """LL900 where the budget left work undone; whether it did."""
        for path, (why, start, end) in self.budget.undone.items():
            if path in self.wanted and "LL900" in self.project.file_options(path).select:
                self._keep(Finding("LL900", name_of("LL900"), unfinished_message(why), path, start, end))
        return bool(self.budget.undone)

    def done(self) -> dict[str, list[Finding]]:
        """The findings, noqa comments honoured."""
        out: dict[str, list[Finding]] = {}
        for path, findings in self.out.items():
            text = self.project.read_text(path) or ""
            lines = text.splitlines()
            file_level = file_suppressions(text)
            kept = []
            for finding in findings:
                if not self.project.file_options(path).noqa:
                    kept.append(finding)
                    continue
                line = lines[finding.location.row - 1] if finding.location.row <= len(lines) else ""
                codes = suppressed_codes(line)
                if "*" in file_level or finding.code in file_level or codes and ("*" in codes or finding.code in codes):
                    continue
                kept.append(finding)
            if kept:
                out[path] = kept
        return out


def _sig(finding: Finding) -> tuple[str, int, int]:
    return finding.code, finding.location.row, finding.location.column
