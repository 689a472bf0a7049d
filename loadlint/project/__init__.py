"""Project analysis, phase 2: join the per-file summaries along the calls
between project modules and report what no single file shows.

Phase 1 (the runner, per file, cached) gives each parsed module's summary
(``loadlint.facts.summary``).  Here, cheaply and for the whole project:

* the roots are the modules that build loaders and the modules that import
  one of those (found by a byte search, then summarised on demand, from the
  cache when it has them);
* ``flow.Walk`` follows the calls from each root's body (``modules``
  resolves imports as ``python train.py`` would);
* a loader factory entered with values from its caller is analysed again
  with those values bound to its parameters, so every rule applies
  unchanged; what is new is reported on the factory's line, naming the call;
* a loader iterated every epoch, ``next(iter(...))``-ed in a loop, or whose
  batches are moved, in another function than the one that built it, a
  ``DistributedSampler`` whose loader is iterated every epoch elsewhere, and
  a module-level call or line that starts worker processes without a main
  guard, are reported where the user edits, with the chain in the message
  (``reporter``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from loadlint.sources.files import read_source
from loadlint.workspace.config import is_test_file
from loadlint.engine.ipython import RUN_SCRIPT
from loadlint.project.flow import LoaderRef, Walk
from loadlint.project.lightning import trainer_runs
from loadlint.project.modules import ModuleResolver, project_root
from loadlint.project.context import View
from loadlint.project.reporter import NOTEBOOK, Reporter
from loadlint.rules import name_of, revising_rules
from loadlint.rules.project_context import HoldFix
from loadlint.types import Finding, Flags, Location, Options, Summary

__all__ = ["Project", "ProjectResult", "project_root"]

#: Files searched for imports of a loader-building module, at most.
MAX_FILES = 20000


@dataclass
class ProjectResult:
    """What phase 2 found, each kind by absolute path."""

    #: New findings to report.
    findings: dict[str, list[Finding]] = field(default_factory=dict)
    #: The places of the file's own findings whose fixes to withhold, each
    #: with the reason (``Rule.revise_own``); row 0: every finding of the code.
    held: dict[str, list[Finding]] = field(default_factory=dict)
    #: The file's own findings to take back (``Rule.revise_own``).
    withdrawn: dict[str, list[Finding]] = field(default_factory=dict)
    #: Whether the phase stopped short: such a result is never cached.
    unfinished: bool = False


@dataclass
class Project:
    """What phase 2 needs from the run.

    ``summaries`` are phase 1's (absolute path -> summary); ``summary_of``
    summarises any other project file on demand (None when it does not
    parse); ``files`` lists the project's Python files for the importer
    search; ``file_options`` gives a reported file's options.
    """

    root: Path
    summaries: dict[str, Summary]
    summary_of: Callable[[str], Summary | None]
    read_text: Callable[[str], str | None]
    files: Callable[[], Iterable[str]]
    file_options: Callable[[str], Options]
    #: A file's own findings when phase 1 has them (else it is analysed again).
    own_findings: Callable[[str], list[Finding] | None] = lambda path: None
    #: Every code some file of the project selects (None: any may be):
    #: a pass reporting none of them is skipped.
    codes: frozenset[str] | None = None
    #: A project file's bytes, read within a folder (the run's, when it kept them).
    read_bytes: Callable[[str, str | None], bytes] = read_source

    def findings(self, report_in: Iterable[str]) -> ProjectResult:
        """New findings for the files in ``report_in`` (absolute paths)."""
        wanted = set(report_in)
        known: dict[str, Summary | None] = dict(self.summaries)

        def summary_of(path: str) -> Summary | None:
            if path not in known:
                known[path] = self.summary_of(path) if len(known) < MAX_FILES else None
            return known[path]

        resolver = ModuleResolver(self.root)

        def callee(importer: str, name: str) -> tuple[str, str] | None:
            if name.startswith(":"):
                return importer, name[1:]
            summary = summary_of(importer)
            if summary is None:
                return None
            return resolver.module_file(importer, name)

        # A module that builds a TensorDataset may return it for another
        # module's loader (LL201 follows it); its text says so unparsed,
        # searched once whatever the number of calls into it.
        builds_tensors: dict[str, bool] = {}

        def worth(path: str) -> bool:
            if path in self.summaries:
                return True
            if path not in builds_tensors:
                text = self.read_text(path)
                builds_tensors[path] = text is not None and "TensorDataset" in text
            return builds_tensors[path]

        walk = Walk(summary_of, callee, worth)
        for path in sorted(self._roots()):
            walk.root(path)

        def flags(path: str) -> Flags:
            summary = summary_of(path)
            found = summary.get("flags") if summary else None
            return found if isinstance(found, dict) else NO_FLAGS

        report = Reporter(self, wanted, flags, walk.entered)
        for ref in walk.loaders:
            if report.budget.spent():
                span = report.where.span(ref.frame.path, int(ref.summary.get("at", -1)))
                report.budget.skip(ref.frame.path, report.budget.stopped(), span)
                continue
            report.loader(ref)
        report.rest(lambda wanted: trainer_runs(self.summaries, summary_of, self.importers, resolver, wanted))
        unfinished = report.unfinished()
        found = report.done()
        result = ProjectResult(found, unfinished=unfinished)
        # Every finding of a code in a file: why its fixes are withheld, by (path, code).
        whole = self._revise(result, report, walk.loaders)
        if report.changes:
            from loadlint.project.fixing import decide

            decide(found, report.changes, self.read_text, self.file_options, whole)
        return result

    def _revise(self, result: ProjectResult, report: Reporter, loaders: list[LoaderRef]) -> dict[tuple[str, str], str]:
        """The rules' revisions of their own findings (``Rule.revise_own``)
        into ``result``, given what the hooks reported and every loader the
        walks built."""
        whole: dict[tuple[str, str], str] = {}
        introduced = report.introduced()
        flows = report.views(loaders)
        for rule in revising_rules():
            reported = frozenset(path for path, found in result.findings.items() if any(f.code == rule.code for f in found))
            view = View(report.shared, loaders=flows, introduced=introduced, summarised=tuple(self.summaries),
                        reported=reported, importers=self._importers_of)
            for revision in rule.revise_own(view):
                at = None if revision.at is None else report.where.span(revision.path, revision.at)
                if revision.at is None and isinstance(revision, HoldFix):
                    # One finding at row 0 stands for all of the file's.
                    at = (Location(0, 0), Location(0, 0))
                    whole.setdefault((revision.path, rule.code), revision.reason)
                if at is None or revision.at is not None and revision.path.endswith(NOTEBOOK):
                    continue  # a notebook's own findings are placed in its cells
                finding = Finding(rule.code, name_of(rule.code), "", revision.path, *at)
                if isinstance(revision, HoldFix):
                    finding.fix_withheld = revision.reason
                    result.held.setdefault(revision.path, []).append(finding)
                else:
                    result.withdrawn.setdefault(revision.path, []).append(finding)
        return whole

    def mentions(self, word: bytes) -> bool:
        """Whether any project file contains ``word`` (a byte search, for a
        rule that must stay silent when a call it cannot follow may exist)."""
        for count, path in enumerate(self.files()):
            if count >= MAX_FILES:
                return True  # not all read: assume it is there
            try:
                if word in self.read_bytes(path, str(self.root)):
                    return True
            except OSError:
                continue
        return False

    def _importers_of(self, paths: Sequence[str]) -> dict[str, str]:
        """For each module of ``paths`` that another project module imports,
        the first importer found (a notebook is never imported)."""
        scripts = {path: _stem(path) for path in paths if not path.endswith(NOTEBOOK) and _stem(path)}
        if not scripts:
            return {}
        stems = re.compile(rb"\b(?:" + b"|".join(re.escape(os.fsencode(s)) for s in sorted(set(scripts.values()))) + rb")\b")
        resolver = ModuleResolver(self.root)
        importer: dict[str, str] = {}
        for count, path in enumerate(self.files()):
            if count >= MAX_FILES or len(importer) == len(scripts):
                break
            try:
                data = self.read_bytes(path, str(self.root))
            except OSError:
                continue
            if not imports_one_of(data, stems):
                continue
            summary = self.summaries.get(path) or self.summary_of(path)
            for dotted in (summary["imports"] if summary else {}).values():
                found = resolver.module_file(path, dotted) if isinstance(dotted, str) else None
                if found is not None and found[0] in scripts and found[0] != path:
                    importer.setdefault(found[0], path)
        return importer

    def importers(self, wanted: dict[str, set[str]]) -> list[str]:
        """Project files that import one of the modules (by path) and name
        one of its names given (a byte search, as for the factories' callers).
        Test files are left out: a Trainer there runs under pytest, not in
        training (Lightning's own tests import its demo modules a hundred
        times; summarising them all took a cold run 1.4 s)."""
        stems = {_stem(path) for path in wanted if _stem(path)}
        if not stems:
            return []
        names = [os.fsencode(name) for found in wanted.values() for name in sorted(found)]
        return self._naming(stems, names, lambda path: is_test_file(os.path.relpath(path, self.root).replace(os.sep, "/")))

    def _naming(self, stems: Iterable[str], names: list[bytes], skip: Callable[[str], bool]) -> list[str]:
        """Project files (but those ``skip`` leaves out) that import a module
        of ``stems`` and mention one of ``names``: a byte search."""
        pattern = re.compile(rb"\b(?:" + b"|".join(re.escape(os.fsencode(s)) for s in sorted(stems)) + rb")\b")
        out = []
        for count, path in enumerate(self.files()):
            if count >= MAX_FILES:
                break
            if skip(path):
                continue
            try:
                data = self.read_bytes(path, str(self.root))
            except OSError:
                continue
            if any(name in data for name in names) and imports_one_of(data, pattern):
                out.append(path)
        return out

    def _roots(self) -> set[str]:
        roots = {path for path, summary in self.summaries.items() if _builds_loaders(summary)}
        factories: dict[str, set[str]] = {}
        for path in roots:
            names = _factories(self.summaries[path])
            if names and _stem(path):
                factories.setdefault(_stem(path), set()).update(names)
        if not factories:
            return roots
        functions = [os.fsencode(name) for names in factories.values() for name in sorted(names)]
        roots.update(self._naming(factories, functions, roots.__contains__))
        return roots


#: An import statement at a line's start (a parenthesised list may span
#: lines; in a notebook's JSON, a line is a string): the module after
#: ``from``, and what ``import`` names.
_IMPORT = re.compile(
    rb"(?:^[ \t]*\"?|\\n[ \t]*)(?:from[ \t]+(\S*)(?:[ \t]+import[ \t]*(\([^)]*|[^\n]*))?|import[ \t]*(\([^)]*|[^\n]*))",
    re.MULTILINE,
)


def imports_one_of(data: bytes, modules: re.Pattern[bytes]) -> bool:
    """Whether an import statement of ``data`` names one of ``modules``
    (found in each statement's parts: one pattern over the whole file with
    every module name in it retried them at every character).

    The statements are ``_IMPORT``'s matches, found as ``finditer`` finds
    them, but tried only where one can start: before a ``from`` or
    ``import`` (the regex, which may start at any line or ``\\n``, tried
    every character of the file)."""
    end = 0
    for keyword in _KEYWORD.finditer(data):
        for start in _statement_starts(data, keyword.start()):
            if start < end:
                continue
            match = _IMPORT.match(data, start)
            if match is None:
                continue
            end = match.end()
            if _names_one_of(data, match, modules):
                return True
            break
    # A notebook's ``%run helpers.py`` leaves the module's names in the notebook's.
    return b"%run" in data and any(modules.search(data, *m.span(1)) is not None for m in _RUN.finditer(data))


_RUN = re.compile(RUN_SCRIPT.encode() + rb"\b")


_KEYWORD = re.compile(rb"from|import")
_BLANK = (0x20, 0x09)


def _statement_starts(data: bytes, at: int) -> list[int]:
    """Where a match of ``_IMPORT`` whose keyword is at ``at`` can start, in
    order: a ``\\n`` in a notebook's JSON, then blanks; a line's start, then
    blanks and perhaps a quote."""
    starts = []
    i = at
    while i > 0 and data[i - 1] in _BLANK:
        i -= 1
    if i >= 2 and data[i - 2 : i] == b"\\n":
        starts.append(i - 2)
    i = at - 1 if at > 0 and data[at - 1] == 0x22 else at
    while i > 0 and data[i - 1] in _BLANK:
        i -= 1
    if i == 0 or data[i - 1] == 0x0A:
        starts.append(i)
    return sorted(starts)


def _names_one_of(data: bytes, match: re.Match[bytes], modules: re.Pattern[bytes]) -> bool:
    for group in (1, 2, 3):
        start, end = match.span(group)
        # A part ends at a space, a bracket or a line's end: searching up
        # to it keeps the word boundary a search of the file would see.
        if start >= 0 and modules.search(data, start, end) is not None:
            return True
    return False


#: The flags of a module without a summary: nothing seen.
NO_FLAGS: Flags = {"cuda": False, "cuda_code": False, "set_epoch": False, "frameworks": False, "start_methods": []}


def _builds_loaders(summary: Summary | None) -> bool:
    return summary is not None and any(fn.get("loaders") for fn in summary.get("functions", {}).values())


def _factories(summary: Summary) -> set[str]:
    """Module-level functions that build a loader from their parameters or return one."""
    out = set()
    for name, fn in summary.get("functions", {}).items():
        if name == "<module>" or "." in name:
            continue
        returns = fn.get("returns", {}).get("values", [])
        if any(loader.get("kw") for loader in fn.get("loaders", [])) or any("loader" in v for v in returns):
            out.add(name)
    return out


def _stem(path: str) -> str:
    p = Path(path)
    return p.parent.name if p.stem == "__init__" else p.stem
