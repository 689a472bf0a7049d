"""Loaders of the run's files whose dataset class another project module
defines, joined to what that module's summary says of the class (a handle
``__init__`` keeps), or whose pre-tokenized rows or padding collate its
functions build, and handed to the rules' project hooks
(``ProjectContext.imported``): their findings are reported at the loader,
and the revisions of their own findings (``Rule.revise_own``) are placed
there too."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, NamedTuple

from loadlint.engine.summaries import locate
from loadlint.engine.suppress import file_suppressions, suppressed_codes
from loadlint.project import NO_FLAGS
from loadlint.project.context import NOTEBOOK, Locator, Shared, View
from loadlint.project.modules import ModuleResolver
from loadlint.rules import name_of, project_rules, revising_rules
from loadlint.rules.project_context import HandleClass, HoldFix, ImportedLoader
from loadlint.types import Finding, Flags, Options, Summary


def imported_loaders(
    path: str, summary: Summary, summary_of: Callable[[str], Summary | None], resolver: ModuleResolver
) -> list[ImportedLoader]:
    """The loaders of ``path`` whose dataset class is another project module's."""
    methods = frozenset(m for m in (summary.get("flags") or {}).get("start_methods") or [] if isinstance(m, str))
    out = []
    for loader in summary.get("imported_datasets", []):
        name, workers = loader.get("class"), loader.get("workers", loader.get("workers_code"))
        where = resolver.module_file(path, name) if isinstance(name, str) else None
        if where is None or "." in where[1] or where[0] == path:
            continue
        module = summary_of(where[0])
        kept = module.get("handle_classes", {}).get(where[1]) if module is not None else None
        handle = HandleClass(*(str(kept.get(k, "")) for k in ("cls", "attr", "what", "written", "error"))) if isinstance(kept, dict) else None
        context = loader.get("context")
        listed = module.get("in_memory_classes") if module is not None else None
        in_memory = isinstance(listed, list) and where[1] in listed
        out.append(ImportedLoader(path, int(loader.get("at", -1)), workers if type(workers) in (int, str) else None,
                                  context if isinstance(context, str) else None, methods, where[0], handle, in_memory))
    for built in summary.get("imported_rows", []):
        helpers = _padded_rows_module(path, built, summary_of, resolver)
        if helpers is not None:
            out.append(ImportedLoader(path, int(built.get("at", -1)), None, None, methods, helpers, None, True))
    return out


def _padded_rows_module(
    path: str, loader: dict[str, Any], summary_of: Callable[[str], Summary | None], resolver: ModuleResolver
) -> str | None:
    """The module of a loader's imported rows or collate when each function
    named is, in its own module's summary, one that returns pre-tokenized
    rows or a padding collate (``facts.pretokenized``); else None."""
    module = None
    for kind in ("rows", "collates"):
        named = loader.get(kind, [])
        for name in named if isinstance(named, list) else [None]:
            where = resolver.module_file(path, name) if isinstance(name, str) else None
            if where is None or "." in where[1] or where[0] == path:
                return None
            found = summary_of(where[0])
            helpers = found.get("padded_rows") if found is not None else None
            listed = helpers.get(kind) if isinstance(helpers, dict) else None
            if not isinstance(listed, list) or where[1] not in listed:
                return None
            module = where[0]
    return module


class Elsewhere(NamedTuple):
    """What another module's dataset class means for the run's files."""

    #: The project hooks' findings, by path.
    found: dict[str, list[Finding]]
    #: The files' own findings whose fix is withheld, the reason on each, by path.
    held: dict[str, list[Finding]]
    #: The files' own findings taken back, by path.
    withdrawn: dict[str, list[Finding]]


def handles_elsewhere(
    root: Path,
    summaries: dict[str, Summary],
    summary_of: Callable[[str], Summary | None],
    read_text: Callable[[str], str | None],
    original: dict[str, int],
    options: Callable[[str], Options],
    own_findings: Callable[[str], list[Finding] | None],
) -> Elsewhere:
    resolver = ModuleResolver(root)

    def flags(path: str) -> Flags:
        found = summary_of(path)
        return found["flags"] if found is not None else NO_FLAGS

    # No hook reads the byte search from here: a word counts as present.
    shared = Shared(Locator(read_text), flags, lambda word: True, lambda path: options(path).profile())
    out = Elsewhere({}, {}, {})
    for path in original:
        summary = summaries.get(path)
        select = options(path).select if summary is not None else frozenset()
        rules = [rule for rule in project_rules() if rule.code in select]
        # A rule revises its findings only in a file that has some (when known).
        own = own_findings(path) if summary is not None and (
            summary.get("imported_datasets") or summary.get("imported_rows")) else []
        revising = [rule for rule in revising_rules() if rule.code in select and (
            own is None or any(f.code == rule.code for f in own))]
        if summary is None or not (rules or revising):
            continue
        view = View(shared, imported=imported_loaders(path, summary, summary_of, resolver))
        found = [(rule.code, report.at, report.message) for rule in rules for report in rule.check_project(view)]
        revised = [(rule.code, revision) for rule in revising for revision in rule.revise_own(view)
                   if revision.path == path and revision.at is not None]
        text = read_text(path) if found or revised else None
        if text is None:
            continue
        spans = locate(text, [at for _, at, _ in found] + [int(revision.at or 0) for _, revision in revised])
        for code, revision in revised:
            if revision.at not in spans:
                continue
            if isinstance(revision, HoldFix):
                out.held.setdefault(path, []).append(
                    Finding(code, name_of(code), "", path, *spans[revision.at], fix_withheld=revision.reason))
            elif not path.endswith(NOTEBOOK):  # a notebook's own findings are placed in its cells
                out.withdrawn.setdefault(path, []).append(Finding(code, name_of(code), "", path, *spans[revision.at]))
        lines = text.splitlines()
        file_level = file_suppressions(text) if options(path).noqa else set()
        for code, at, message in found:
            if at not in spans:
                continue
            start, end = spans[at]
            line = lines[start.row - 1] if start.row <= len(lines) else ""
            codes = (suppressed_codes(line) or set()) if options(path).noqa else set()
            if {"*", code} & (set(file_level) | set(codes)):
                continue
            out.found.setdefault(path, []).append(Finding(code, name_of(code), message, path, start, end))
    return out
