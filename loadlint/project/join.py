"""The runner's side of project analysis: group a run's files by project,
give phase 2 their summaries (phase 1's, or the cache's, or made on demand
for files the run did not parse), and add its findings to the results.

The project root of a file is the nearest folder above it with a config
file or a version-control folder (``modules.ROOT_MARKERS``); the file's
folder when there is none.  Every Python file under the root may be read for
facts (a bounded walk that does not follow links); findings are reported
only in the run's own files, so a pre-commit run given one staged file
still sees how the rest of the project calls it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from loadlint.workspace.entries import summary_from_json
from loadlint.workspace.config import Settings
from loadlint.workspace.discover import Candidate
from loadlint.sources.prefilter import passes_prefilter
from loadlint.engine.summaries import summarise_text
from loadlint.sources.files import KeptBytes, Staging, read_source
from loadlint.engine.notebook import joined_text, to_cells
from loadlint.engine.pipeline import ProfileCache, options_for
from loadlint.project import MAX_FILES, Project, ProjectResult
from loadlint.project.handles import handles_elsewhere
from loadlint.project.modules import ModuleResolver, project_root
from loadlint.project.config_files import files_read, project_config_findings
from loadlint.project.values import Constants, constant_findings
from loadlint.sources.source import DecodeError, decode
from loadlint.types import FileResult, Finding, Options, Summary

if TYPE_CHECKING:
    from loadlint.workspace.cache import Cache

#: Folders never read for facts: caches, environments, build output.
SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "venv", "env", "build", "dist"})
#: The cache's configuration fingerprint for a summary made on demand.
SUMMARY_ONLY = "project-summary"
NOTEBOOK = ".ipynb"


class Listing:
    """The Python files under each root of a run and their ``stat``, shared
    by its roots: a tree without root markers makes every folder a root of
    its own, and a root nested in one walked already takes its files from
    that walk (in the same order: folders top-down, names sorted) instead of walking
    and stating its subtree again."""

    def __init__(self) -> None:
        #: Walks that listed every file: (files, folder -> its files' span).
        self.walks: list[tuple[list[str], dict[str, tuple[int, int]]]] = []
        self.stats: dict[str, tuple[int, int] | None] = {}

    def files(self, root: Path) -> list[str]:
        top = str(root)
        for files, spans in self.walks:
            span = spans.get(top)
            if span is not None:
                return files[span[0] : span[1]]
        files, starts = [], []
        for folder, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS)
            starts.append((folder, len(files)))
            files.extend(os.path.join(folder, name) for name in sorted(names) if name.endswith((".py", NOTEBOOK)))
            if len(files) >= MAX_FILES:
                return files[:MAX_FILES]  # cut short: no subtree can be taken from it
        self.walks.append((files, _spans(starts, len(files))))
        return files

    def stat(self, path: str) -> tuple[int, int] | None:
        if path not in self.stats:
            try:
                st = os.stat(path)
                self.stats[path] = (st.st_size, st.st_mtime_ns)
            except OSError:
                self.stats[path] = None
        return self.stats[path]


def _spans(starts: list[tuple[str, int]], total: int) -> dict[str, tuple[int, int]]:
    """Each folder's files in a top-down walk: from its start to the start
    of the next folder outside it."""
    spans: dict[str, tuple[int, int]] = {}
    open_folders: list[tuple[str, int]] = []
    for folder, start in starts:
        while open_folders and not folder.startswith(open_folders[-1][0].rstrip(os.sep) + os.sep):
            done, begun = open_folders.pop()
            spans[done] = (begun, start)
        open_folders.append((folder, start))
    for done, begun in open_folders:
        spans[done] = (begun, total)
    return spans


def join_project(
    candidates: list[Candidate],
    results: list[FileResult | None],
    profiles: ProfileCache,
    cache: Callable[[], Cache] | None,
    withdrawn: dict[str, frozenset[tuple[str, int, int]]] | None = None,
    kept: KeptBytes | None = None,
    *,
    staging: Staging | None = None,
    read_as: dict[str, tuple[int, int] | None] | None = None,
) -> None:
    """Add project findings to ``results`` (parallel to ``candidates``;
    None where the run's pre-filter skipped the file); the (code, row,
    column) of the findings it takes back go to ``withdrawn``, by absolute
    path.  ``kept``: the bytes the run read, for the byte searches;
    ``staging``: a dry run's writes, which the reads see; ``read_as``: gets
    the (size, modification time) of each file with findings, as read
    (``fixing.write`` writes only to a file still so)."""
    groups: dict[Path, list[int]] = {}
    roots: dict[str, Path] = {}
    above: dict[str, Path | None] = {}
    #: Whether each file of the run may build a loader (the pre-filter's verdict).
    builds: dict[str, bool] = {}
    for index, candidate in enumerate(candidates):
        path = os.path.abspath(candidate.path)
        builds[path] = results[index] is not None or path.endswith(NOTEBOOK)
        folder = os.path.dirname(path)
        if folder not in roots:
            roots[folder] = project_root(Path(folder), above)
        groups.setdefault(roots[folder], []).append(index)
    listing = Listing()
    for root, indexes in groups.items():
        # No file of the project can build a loader: nothing to join (a tree
        # without root markers has a project per folder, most of them so).
        if not any(builds.get(path, True) for path in listing.files(root)):
            continue
        try:
            _join_one(root, indexes, candidates, results, profiles, cache, withdrawn, listing, kept, staging, read_as)
        except (OSError, ValueError, RecursionError, MemoryError):
            # Project findings are extra: a project that cannot be read
            # whole still gets every file's own findings.
            continue


def project_key(
    root: Path, files: list[str], settings: str, listing: Listing | None = None, staged: dict[str, bytes] | None = None,
) -> str:
    """A digest of every project file's name, size and modification time,
    the texts a dry run staged in place of files (their stat still shows
    the disk's: a later round keyed on it alone got the first round's
    findings, whose edits then landed on text fixed already), and the
    settings: equal keys, equal project findings."""
    import hashlib

    stat = (listing or Listing()).stat
    digest = hashlib.blake2b(f"{root}\0{settings}".encode(), digest_size=20)
    for path in files:
        found = stat(path)
        if found is not None:
            digest.update(f"\0{path}\0{found[0]}\0{found[1]}".encode(errors="surrogateescape"))
    for path, data in sorted((staged or {}).items()):
        digest.update(f"\0staged\0{path}\0".encode(errors="surrogateescape") + hashlib.blake2b(data, digest_size=20).digest())
    return digest.hexdigest()


def _join_one(
    root: Path,
    indexes: list[int],
    candidates: list[Candidate],
    results: list[FileResult | None],
    profiles: ProfileCache,
    cache: Callable[[], Cache] | None,
    withdrawn: dict[str, frozenset[tuple[str, int, int]]] | None = None,
    listing: Listing | None = None,
    kept: KeptBytes | None = None,
    staging: Staging | None = None,
    read_as: dict[str, tuple[int, int] | None] | None = None,
) -> None:
    original: dict[str, int] = {os.path.abspath(candidates[i].path): i for i in indexes}
    read_bytes: Callable[[str, str | None], bytes] = (
        kept.read if kept is not None else staging.read if staging is not None else read_source
    )
    listing = listing or Listing()
    files = listing.files(root)
    first = candidates[indexes[0]]
    phase1 = cache() if cache is not None else None
    opened = phase1.sub("project") if phase1 is not None else None
    # The settings as the root sees them: one key whichever files a run is given.
    # Messages quote paths from the current folder, so it is part of the key.
    target = tuple(sorted(first.settings.target.items()))
    settings_key = f"{first.settings.fingerprint(str(root / '__init__.py'))}\0{target!r}\0{os.getcwd()}"
    # The YAML files the run's modules read are part of the key: editing one changes their findings.
    key = project_key(root, files + files_read(_given_summaries(original, results), root), settings_key, listing,
                      staging.files if staging is not None else None)
    found: ProjectResult | None = None
    if opened is not None:
        from loadlint.workspace.cache import ProjectCache

        stored = ProjectCache(opened).load(str(root), key)
        if stored is not None:
            found = ProjectResult(stored.get("findings", {}), stored.get("held", {}), stored.get("withdrawn", {}))
    if found is None:
        found = _analyse(root, files, original, candidates, _given_summaries(original, results), profiles, opened, phase1, results,
                         read_bytes)
        if opened is not None and not found.unfinished:  # a phase stopped short is tried again next run
            ProjectCache(opened).store(str(root), key, {"findings": found.findings, "held": found.held, "withdrawn": found.withdrawn})
    if read_as is not None:
        for path in found.findings:
            read_as[path] = listing.stat(path)
    for path, findings in found.findings.items():
        if path in original:
            _add(results, original[path], candidates, findings, read_bytes)
    for path, findings in found.held.items():
        index = original.get(path)
        held = _hold(results[index], findings) if index is not None else set()
        if held and withdrawn is not None:
            withdrawn[path] = withdrawn.get(path, frozenset()) | held
    for path, findings in found.withdrawn.items():
        index = original.get(path)
        if index is not None:
            _withdraw(results[index], findings)
            if withdrawn is not None:
                withdrawn[path] = withdrawn.get(path, frozenset()) | {_place(f) for f in findings}


def _given_summaries(original: dict[str, int], results: list[FileResult | None]) -> dict[str, Summary]:
    """The summaries phase 1 made or the cache kept for the files given."""
    summaries: dict[str, Summary] = {}
    for path, i in original.items():
        result = results[i]
        if result is not None and result.summary is None:
            result.summary = summary_from_json(result.summary_json)
        if result is not None and result.summary is not None:
            summaries[path] = result.summary
    return summaries


def _analyse(
    root: Path,
    files: list[str],
    original: dict[str, int],
    candidates: list[Candidate],
    summaries: dict[str, Summary],
    profiles: ProfileCache,
    opened: Cache | None,
    phase1: Cache | None,
    results: list[FileResult | None],
    read_bytes: Callable[[str, str | None], bytes],
) -> ProjectResult:
    """Phase 2 over the whole project: findings for every file of it."""
    first = candidates[next(iter(original.values()))]
    texts: dict[str, str | None] = {}
    # Every read of phase 2 stays in the project: a link out of it is refused.
    inside = str(root)

    def read_text(path: str) -> str | None:
        """A module's text; a notebook's code cells joined as one module."""
        if path not in texts:
            try:
                data = read_bytes(path, inside)
                texts[path] = joined_text(data) if path.endswith(NOTEBOOK) else decode(data).text
            except (OSError, DecodeError):
                texts[path] = None
        return texts[path]

    made: dict[str, Summary | None] = {}

    def summary_of(path: str) -> Summary | None:
        if path in summaries:
            return summaries[path]
        if path not in made:
            made[path] = made_summary(path)
        return made[path]

    def made_summary(path: str) -> Summary | None:
        try:
            data = read_bytes(path, inside)
        except OSError:
            return None
        digest = ""
        if opened is not None:
            from loadlint.workspace.cache import content_hash

            digest = content_hash(data)
            # Phase 1's entry of a run over the whole project, else our own.
            for store, fingerprint in ((phase1, first.settings.fingerprint(path)), (opened, SUMMARY_ONLY)):
                entry = store.load(path, fingerprint, digest) if store is not None else None
                if entry is not None and (entry.summary is not None or store is opened):
                    return entry.summary
        try:
            text = joined_text(data) if path.endswith(NOTEBOOK) else decode(data).text
            summary = None if text is None else summarise_text(text)
        except DecodeError:
            summary = None
        if opened is not None:
            opened.store(path, SUMMARY_ONLY, digest, None, [], summary)
        return summary

    # Files the run was not given but that build loaders are roots too.
    for path in files:
        if path in summaries:
            continue
        given = original.get(path)
        if given is not None and results[given] is None and not path.endswith(NOTEBOOK):
            continue  # the run read it already: it cannot build a loader (the pre-filter)
        try:
            data = read_bytes(path, inside)
        except OSError:
            continue
        if passes_prefilter(data):
            summary = summary_of(path)
            if summary is not None:
                summaries[path] = summary

    def options(path: str) -> Options:
        candidate = candidates[original[path]] if path in original else first
        return options_for(candidate.settings, path if path not in original else str(candidate.path), profiles)

    def own_findings(path: str) -> list[Finding] | None:
        # A notebook's are in cell positions, not the joined module's.
        result = results[original[path]] if path in original and not path.endswith(NOTEBOOK) else None
        return None if result is None or result.error is not None else list(result.findings)

    constants = Constants(root, ModuleResolver(root), summary_of, read_text, read_bytes)
    resolved = {path: constants.resolve(path, summary) for path, summary in summaries.items()}

    def resolved_summary_of(path: str) -> Summary | None:
        summary = summary_of(path)
        return None if summary is None else constants.resolve(path, summary)

    # A file's codes are its settings' less what they ignore for it: the union bounds every file's.
    settings = {id(candidates[i].settings): candidates[i].settings for i in original.values()}
    codes = frozenset().union(*(s.codes() for s in settings.values()))
    project = Project(root, resolved, resolved_summary_of, read_text, lambda: iter(files), options, own_findings,
                      codes, read_bytes)
    result = project.findings(set(files) | set(original))
    found = result.findings
    for path, summary in sorted(summaries.items()):
        for finding in _constant_findings(path, summary, constants, read_text, options, own_findings):
            if not any(_same_place(finding, f) for f in found.get(path, [])):
                found.setdefault(path, []).append(finding)
    configured = [(path, summary) for path, summary in sorted(summaries.items()) if path in original]
    for path, findings in project_config_findings(root, configured, read_text, options, own_findings).items():
        found.setdefault(path, []).extend(f for f in findings if not any(_same_place(f, g) for g in found.get(path, [])))
    elsewhere = handles_elsewhere(root, summaries, summary_of, read_text, original, options, own_findings)
    for path, handles in elsewhere.found.items():
        found.setdefault(path, []).extend(f for f in handles if not any(_same_place(f, g) for g in found.get(path, [])))
    for path, held in elsewhere.held.items():
        text = read_text(path) if path.endswith(NOTEBOOK) else None
        result.held.setdefault(path, []).extend(held if text is None else to_cells(held, text))
    for path, findings in found.items():
        text = read_text(path) if path.endswith(NOTEBOOK) else None
        if text is not None:
            found[path] = to_cells(findings, text)
    for path, gone in elsewhere.withdrawn.items():
        result.withdrawn.setdefault(path, []).extend(gone)
    for path, gone in result.withdrawn.items():
        places = {_place(f) for f in gone}
        if path in found:
            found[path] = [f for f in found[path] if _place(f) not in places]
    return result


def _place(finding: Finding) -> tuple[str, int, int]:
    return finding.code, finding.location.row, finding.location.column


def _hold(result: FileResult | None, held: list[Finding]) -> set[tuple[str, int, int]]:
    """Withhold the fixes of ``result``'s findings at ``held``'s places, with
    their reasons; the places withheld."""
    reasons = {_place(f): f.fix_withheld for f in held}
    out = set()
    for finding in result.findings if result is not None else []:
        # Row 0: every finding of that code in the file (LL013's one guard).
        reason = reasons.get(_place(finding)) or reasons.get((finding.code, 0, 0))
        if reason is not None and finding.fix is not None:
            finding.fix, finding.fix_withheld = None, reason
            out.add(_place(finding))
    return out


def _withdraw(result: FileResult | None, gone: list[Finding]) -> None:
    if result is None:
        return
    places = {_place(f) for f in gone}
    result.findings = [f for f in result.findings if _place(f) not in places]


def _constant_findings(
    path: str,
    summary: Summary,
    constants: Constants,
    read_text: Callable[[str], str | None],
    options: Callable[[str], Options],
    own_findings: Callable[[str], list[Finding] | None],
) -> list[Finding]:
    """A module's findings with the project constants it imports bound."""
    functions = summary.get("functions", {}).values()
    builds = any(fn.get("loaders") for fn in functions) or any(
        str(call.get("callee", "")).endswith("TrainingArguments") for fn in functions for call in fn.get("calls", [])
    )
    if not builds:
        return []
    given = constants.bindings(path, summary)
    text = read_text(path) if given else None
    if text is None:
        return []
    return constant_findings(path, text, given, options(path), own_findings(path), notebook=path.endswith(NOTEBOOK))


def _same_place(a: Finding, b: Finding) -> bool:
    return (a.code, a.location.row, a.location.column) == (b.code, b.location.row, b.location.column)


def _add(
    results: list[FileResult | None], index: int, candidates: list[Candidate], findings: list[Finding],
    read_bytes: Callable[[str, str | None], bytes],
) -> None:
    result = results[index]
    if result is None:
        result = results[index] = FileResult(str(candidates[index].path))
    for finding in findings:
        finding.path = result.path
    result.findings = sorted(
        result.findings + findings, key=lambda f: (f.cell or 0, f.location.row, f.location.column, f.code)
    )
    if result.source is None:
        try:
            result.source = decode(read_bytes(str(candidates[index].path), None))
        except (OSError, DecodeError):
            pass


def check_in_project(path: Path, settings: Settings, profiles: ProfileCache, cache: Callable[[], Cache] | None) -> FileResult:
    """One file's result with its project findings, from the files on disk
    (the language server's view of a saved document)."""
    from loadlint.engine.pipeline import check_path

    candidate = Candidate(path, settings, True)
    results: list[FileResult | None] = [check_path(path, options_for(settings, str(path), profiles))]
    join_project([candidate], results, profiles, cache)
    result = results[0]
    assert result is not None
    return result
