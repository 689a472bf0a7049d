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
  batches are moved, in another function than the one that built it, and a
  module-level call that starts worker processes without a main guard, are
  reported where the user edits, with the chain in the message.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from loadlint.engine import Bindings, analyse, file_suppressions, suppressed_codes
from loadlint.notebook import cell_of
from loadlint.summaries import locate
from loadlint.project.flow import MISSING_VALUE, Event, Frame, LoaderRef, Value, Walk
from loadlint.project.modules import Resolver, project_root
from loadlint.rules import name_of
from loadlint.types import Finding, Location, Options

__all__ = ["Project", "project_root"]

#: Files searched for imports of a loader-building module, at most.
MAX_FILES = 20000
_NOTEBOOK = ".ipynb"
_PERCENT_CELL = re.compile(r"^# %%", re.MULTILINE)


@dataclass
class Project:
    """What phase 2 needs from the run.

    ``summaries`` are phase 1's (absolute path -> summary); ``summary_of``
    summarises any other project file on demand (None when it does not
    parse); ``files`` lists the project's Python files for the importer
    search; ``options_for`` gives a reported file's options.
    """

    root: Path
    summaries: dict[str, dict[str, Any]]
    summary_of: Callable[[str], dict[str, Any] | None]
    read_text: Callable[[str], str | None]
    files: Callable[[], Iterable[str]]
    options_for: Callable[[str], Options]
    #: A file's own findings when phase 1 has them (else it is analysed again).
    own_findings: Callable[[str], list[Finding] | None] = lambda path: None

    def findings(self, report_in: Iterable[str]) -> dict[str, list[Finding]]:
        """New findings for the files in ``report_in`` (absolute paths)."""
        wanted = set(report_in)
        known: dict[str, dict[str, Any] | None] = dict(self.summaries)

        def summary_of(path: str) -> dict[str, Any] | None:
            if path not in known:
                known[path] = self.summary_of(path) if len(known) < MAX_FILES else None
            return known[path]

        resolver = Resolver(self.root)

        def callee(importer: str, name: str) -> tuple[str, str] | None:
            if name.startswith(":"):
                return importer, name[1:]
            summary = summary_of(importer)
            if summary is None:
                return None
            return resolver.module_file(importer, name)

        walk = Walk(summary_of, callee, lambda path: path in self.summaries)
        for path in sorted(self._roots()):
            walk.root(path)
        report = _Reporter(self, wanted)
        for ref in walk.loaders:
            report.loader(ref)
        return report.done()

    def _roots(self) -> set[str]:
        roots = {path for path, summary in self.summaries.items() if _builds_loaders(summary)}
        factories: dict[str, set[str]] = {}
        for path in roots:
            names = _factories(self.summaries[path])
            if names and _stem(path):
                factories.setdefault(_stem(path), set()).update(names)
        if not factories:
            return roots
        stems = b"|".join(re.escape(os.fsencode(s)) for s in sorted(factories))
        # An import naming the module (a parenthesised list may span
        # lines; in a notebook's JSON, a line is a string), in a file that
        # names a factory.
        pattern = re.compile(
            rb"(?:^[ \t]*\"?|\\n[ \t]*)(?:from[ \t]+\S*\b(?:" + stems + rb")\b|(?:from[ \t]+\S+[ \t]+)?import[ \t]*(?:\([^)]*|[^\n]*)\b(?:"
            + stems + rb")\b)",
            re.MULTILINE,
        )
        functions = [os.fsencode(name) for names in factories.values() for name in sorted(names)]
        for count, path in enumerate(self.files()):
            if count >= MAX_FILES:
                break
            if path in roots:
                continue
            try:
                with open(path, "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            if any(name in data for name in functions) and pattern.search(data):
                roots.add(path)
        return roots


def _builds_loaders(summary: dict[str, Any] | None) -> bool:
    return summary is not None and any(fn.get("loaders") for fn in summary.get("functions", {}).values())


def _factories(summary: dict[str, Any]) -> set[str]:
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


def _show(value: Value) -> str:
    if isinstance(value, dict):
        if "value" in value:
            return repr(value["value"])
        if value.get("cpu_count"):
            return "cpu_count()"
    return "?"


def _workers(ref: LoaderRef) -> str | None:
    """The loader's worker count as the message shows it, when certainly > 0."""
    value = ref.setting("num_workers")
    if isinstance(value, dict):
        if type(value.get("value")) is int and value["value"] > 0:
            return str(value["value"])
        if value.get("cpu_count"):
            return "the cpu_count()"
    return None


class _Locator:
    """Positions of summary-numbered nodes, one parse per file needed."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.files: dict[str, dict[int, tuple[Location, Location]]] = {}

    def span(self, path: str, ref: int) -> tuple[Location, Location] | None:
        if path not in self.files:
            text = self.project.read_text(path)
            self.files[path] = {} if text is None else locate(text, None)
        return self.files[path].get(ref)

    def place(self, path: str, ref: int) -> str:
        """``engine.py:40`` (relative to the project root)."""
        span = self.span(path, ref)
        try:
            name = Path(path).relative_to(self.project.root).as_posix()
        except ValueError:
            name = Path(path).name
        if span and path.endswith(_NOTEBOOK):
            cell, row = cell_of(self.project.read_text(path) or "", span[0].row)
            return f"{name}:cell {cell}:{row}"
        return f"{name}:{span[0].row}" if span else name


class _Reporter:
    """Turns the walk's loaders into findings on the files asked for."""

    def __init__(self, project: Project, wanted: set[str]) -> None:
        self.project = project
        self.wanted = wanted
        self.where = _Locator(project)
        self.out: dict[str, list[Finding]] = {}
        self.seen: set[tuple[str, str, int, int]] = set()
        self.baselines: dict[str, set[tuple[str, int, int, str]]] = {}
        self.injected: set[tuple[str, str]] = set()
        self.reanalysed: dict[tuple[str, str], list[Finding]] = {}

    def _add(self, path: str, code: str, ref: int, message: str) -> None:
        if path not in self.wanted:
            return
        options = self.project.options_for(path)
        if code not in options.select:
            return
        span = self.where.span(path, ref)
        if span is None:
            return
        self._keep(Finding(code, name_of(code), message, path, span[0], span[1]))

    def _keep(self, finding: Finding) -> None:
        key = (finding.path, finding.code, finding.location.row, finding.location.column)
        if key in self.seen:
            return
        self.seen.add(key)
        self.out.setdefault(finding.path, []).append(finding)

    def _calls(self, frame: Frame) -> str:
        """``called from train.py:41`` for the chain of calls that entered ``frame``."""
        places = [
            self.where.place(f.parent.path, int(f.site.get("at", -1)))
            for f in reversed(frame.chain()) if f.parent is not None and f.site is not None
        ]
        return "called from " + ", from ".join(places) if places else ""

    # -- the rules ---------------------------------------------------------

    def loader(self, ref: LoaderRef) -> None:
        self._factory(ref)
        self._transfers(ref)
        workers = _workers(ref)
        if workers is None:
            return
        for event in ref.events:
            if event.frame is ref.frame or not event.repeated:
                continue  # the file's own rules see what happens where it is built
            kind = event.use.get("kind")
            if kind == "iter":
                self._epoch(ref, event, workers)
            elif kind == "next_iter":
                self._next_iter(ref, event, workers)
        self._main_guard(ref, workers)

    def _factory(self, ref: LoaderRef) -> None:
        """The factory's file analysed again with this call's values."""
        frame = ref.frame
        if frame.parent is None or frame.path not in self.wanted:
            return
        given: dict[str, dict[str, Any]] = {}
        for param in sorted(set(ref.summary.get("kw", {}).values())):
            value = frame.env.get(param)
            # Only values the rules can use: an unknown default changes nothing.
            if isinstance(value, dict) and _show(value) != "?":
                given[param] = value
        if not given:
            return
        sites = [(f.parent.path, f.site.get("at")) for f in frame.chain() if f.parent is not None and f.site is not None]
        key = (frame.path, json.dumps([frame.function, given, sites], sort_keys=True))
        if key in self.injected:
            return
        self.injected.add(key)
        options = self.project.options_for(frame.path)
        bindings = {frame.function: given}
        memo = (frame.path, json.dumps(bindings, sort_keys=True))
        if memo not in self.reanalysed:
            self.reanalysed[memo] = self._reanalyse(frame.path, bindings, options)
        findings = [dataclasses.replace(f) for f in self.reanalysed[memo]]
        if findings:
            suffix = self._values(frame, given)
        for finding in findings:
            finding.message += suffix
            finding.fix = None  # the fix would change the factory for every caller
            self._keep(finding)

    def _values(self, frame: Frame, given: dict[str, dict[str, Any]]) -> str:
        """`` (with `workers=0` and the default `batch_size=32`; `f` called from train.py:5)``."""
        passed = [f"`{p}={_show(v)}`" for p, v in given.items() if not v.get("default")]
        defaults = [f"`{p}={_show(v)}`" for p, v in given.items() if v.get("default")]
        shown = passed + ([f"the default{'s' if len(defaults) > 1 else ''} " + ", ".join(defaults)] if defaults else [])
        notes = [str(v["note"]) for v in given.values() if v.get("note")]
        return f" (with {' and '.join(shown)}; " + "; ".join(notes + [f"`{frame.function}` {self._calls(frame)}"]) + ")"

    def _reanalyse(self, path: str, bindings: Bindings, options: Options) -> list[Finding]:
        text = self.project.read_text(path)
        if text is None:
            return []
        if path not in self.baselines:
            before = self.project.own_findings(path)
            if before is None:
                before, _ = analyse(text, path, options, notebook=path.endswith(_NOTEBOOK))
            self.baselines[path] = {_sig(f) for f in before}
        after, _ = analyse(text, path, options, bindings=bindings, notebook=path.endswith(_NOTEBOOK))
        return [f for f in after if _sig(f) not in self.baselines[path]]

    def _epoch(self, ref: LoaderRef, event: Event, workers: str) -> None:
        persistent = ref.setting("persistent_workers")
        if persistent is not MISSING_VALUE and not (isinstance(persistent, dict) and persistent.get("value") is False):
            return
        what = "`persistent_workers` is not set" if persistent is MISSING_VALUE else "`persistent_workers=False`"
        use = self.where.place(event.frame.path, int(event.use.get("at", -1)))
        calls = self._calls(event.frame)
        count = ref.setting("num_workers")
        # An imported constant says where it comes from, as a factory's values do.
        note = f" (with {count['note']})" if isinstance(count, dict) and count.get("note") else ""
        message = (
            f"{what}: {workers} workers{note} of this loader are started again at every epoch; "
            f"set `persistent_workers=True` (iterated every epoch by `{event.frame.function}` ({use})"
            + (f" {calls})" if calls else ")")
        )
        self._add(ref.frame.path, "LL204", int(ref.summary.get("at", -1)), message)

    def _transfers(self, ref: LoaderRef) -> None:
        """LL205 on a blocking ``.cuda()`` of a pinned batch in another function
        (``.to(device)`` needs the device's value, which the summary does not keep)."""
        pinned = ref.setting("pin_memory")
        if not (isinstance(pinned, dict) and pinned.get("value") is True):
            return
        for event in ref.events:
            use = event.use
            if event.frame is ref.frame or use.get("kind") != "transfer" or use.get("non_blocking"):
                continue
            if use.get("method") != "cuda":
                continue
            built = self.where.place(ref.frame.path, int(ref.summary.get("at", -1)))
            message = (
                "`.cuda()` of a pinned batch without `non_blocking=True`: the copy blocks and cannot overlap "
                f"compute, so pinning buys nothing; pass `non_blocking=True` (the loader is built at {built})"
            )
            self._add(event.frame.path, "LL205", int(use.get("at", -1)), message)

    def _next_iter(self, ref: LoaderRef, event: Event, workers: str) -> None:
        built = self.where.place(ref.frame.path, int(ref.summary.get("at", -1)))
        calls = self._calls(event.frame)
        message = (
            f"`next(iter(...))` inside a loop creates a new iterator on every pass, restarting and priming "
            f"{workers} workers for one batch; create the iterator once before the loop (the loader is built at "
            f"{built}" + (f"; `{event.frame.function}` {calls})" if calls else ")")
        )
        self._add(event.frame.path, "LL207", int(event.use.get("at", -1)), message)

    def _main_guard(self, ref: LoaderRef, workers: str) -> None:
        """LL013 on the unguarded module-level call that reaches the loop."""
        context = ref.setting("multiprocessing_context")
        if isinstance(context, dict) and context.get("value") == "fork":
            return
        for event in ref.events:
            if event.use.get("kind") not in ("iter", "next_iter"):
                continue
            chain = event.frame.chain()
            root = chain[0]
            if root.function != "<module>" or len(chain) < 2 or self._notebook(root.path):
                continue
            first = chain[1]
            if first.site is None or first.site.get("guarded"):
                continue
            from loadlint.rules.shared import spawn_reason

            reason = spawn_reason(self.project.options_for(root.path).profile())
            if reason is None:
                continue
            loop = self.where.place(event.frame.path, int(event.use.get("at", -1)))
            message = (
                f"this call reaches a loop over a loader with {workers} workers ({loop}, in "
                f"`{event.frame.function}`) without `if __name__ == \"__main__\":`, and its workers may start with "
                f"spawn or forkserver ({reason}): every worker re-imports this script, runs this call again and "
                "fails; call it from a function run under `if __name__ == \"__main__\":`"
            )
            self._add(root.path, "LL013", int(first.site.get("at", -1)), message)

    def _notebook(self, path: str) -> bool:
        """A notebook, or a script in the percent format (``# %%`` cells),
        which Jupyter runs as one: no worker re-imports it (LL012's case)."""
        if path.endswith(_NOTEBOOK):
            return True
        return _PERCENT_CELL.search(self.project.read_text(path) or "") is not None

    def done(self) -> dict[str, list[Finding]]:
        """The findings, noqa comments honoured."""
        out: dict[str, list[Finding]] = {}
        for path, findings in self.out.items():
            text = self.project.read_text(path) or ""
            lines = text.splitlines()
            file_level = file_suppressions(text)
            kept = []
            for finding in findings:
                if not self.project.options_for(path).noqa:
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


def _sig(finding: Finding) -> tuple[str, int, int, str]:
    return finding.code, finding.location.row, finding.location.column, finding.message
