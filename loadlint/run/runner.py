"""Runs a check or fix over many files (discovery, cache, pool, the
per-file work of :mod:`loadlint.engine.pipeline`) for the API.
Where the time goes, and what this module does about it:

* Most files of a repository never mention ``DataLoader``.  They are read
  and tested for the pre-filter words here, in the parent, and never reach
  the engine.  The cache records them with their size, modification time
  and inode: a later run skips them unread while those hold.
* A file that passes is looked up in the cache (:mod:`loadlint.workspace.cache`) by
  its content hash; a hit costs a small JSON read instead of a parse.
* What is left is parsed, here and in worker processes when there is
  enough of it to pay for starting them (:mod:`loadlint.run.pool`).
Results are sorted by path: the report is the same whatever the pool or the cache did.
"""

from __future__ import annotations

import dataclasses
import gc
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from loadlint.engine import pipeline
from loadlint.run.pool import OUT_OF_TIME, POOL_MIN_SAVING, Work, run_pool
from loadlint.workspace.discover import Candidate
from loadlint.sources.prefilter import passes_prefilter, undecodable
from loadlint.sources.files import KeptBytes, Staging, read_resolved
from loadlint.engine.pipeline import ProfileCache, options_for
from loadlint.run.progress import Progress
from loadlint.cst.slicing import fast_nodes
from loadlint.workspace.cache import TurnedAway
from loadlint.types import FileResult, Finding, FixRequest, Run, Target

if TYPE_CHECKING:
    from loadlint.workspace.cache import Cache
    from loadlint.sources.source import Source


#: Rounds of a fix run at most: each applies the project findings' fixes
#: the previous one made possible (pinning, then its transfers).
FIX_ROUNDS = 4


@dataclasses.dataclass(frozen=True)
class _Setup:
    """How a run's passes go, the same for each: cache, pool, progress, profiles."""

    cache: Callable[[], Cache] | None
    jobs: int | None
    progress: Progress | None
    profiles: ProfileCache
    pool_min_saving: int
    #: A dry run's writes, which its reads see (None: not a dry run).
    staging: Staging | None = None
    #: A fix's record of each file's (size, modification time) as the last
    #: project phase read it (``project.fixing.write``); None in a check.
    read_as: dict[str, tuple[int, int] | None] | None = None

    def quiet(self) -> _Setup:
        """The same without progress: a pass whose files are not the ones reported."""
        return dataclasses.replace(self, progress=None)


@fast_nodes()  # one scope for every parse of the run; libcst as it was after
def lint_candidates(
    candidates: Iterable[Candidate],
    request: FixRequest | None = None,
    *,
    cache: Callable[[], Cache] | None = None,
    jobs: int | None = None,
    progress: Progress | None = None,
    profiles: ProfileCache | None = None,
    pool_min_saving: int = POOL_MIN_SAVING,
    project: bool = True,
) -> Run:
    """Check (or fix) candidates; the runner's core, without the report.

    A check and a fix also run project analysis (``loadlint.project``)
    over the candidates' projects, unless ``project`` is off: findings that
    depend on other files are added to the candidates' results.  A fix
    then writes the project findings' fixes and runs again, until none is
    left: it reports what a check right after it would, with every round's
    fixes counted.  A dry run stages its writes in memory instead."""
    setup = _Setup(cache, jobs, progress, profiles or ProfileCache(), pool_min_saving)
    candidates = list(candidates)
    if request is None or not project:
        return _lint_once(candidates, request, setup, project=project)
    if not request.dry_run:
        return _fix_rounds(candidates, request, setup)
    # A dry run (--diff) goes through the same rounds, its writes staged in
    # memory, so that its diff holds the project's fixes too.
    staging = Staging()
    run = _fix_rounds(candidates, request, dataclasses.replace(setup, staging=staging))
    from loadlint.project.fixing import diff_from_disk

    diff_from_disk(run.results, staging.files)  # read outside the staging: the disk
    return run


def _fix_rounds(candidates: list[Candidate], request: FixRequest, setup: _Setup) -> Run:
    # A fix the project takes back (LL201 on a dataset held in memory by
    # another module) is not for the per-file pass to apply.
    withdrawn: dict[str, frozenset[tuple[str, int, int]]] = {}
    read_as: dict[str, tuple[int, int] | None] = {}
    setup = dataclasses.replace(setup, read_as=read_as)
    own: dict[int, FileResult] = {}
    checked = _lint_once(candidates, None, setup.quiet(), withdrawn=withdrawn, own=own)
    # What check offered: the summary says how many more the fixes made possible.
    offered = sum(1 for f in checked.findings if f.fix and (request.unsafe or f.fix.applicability == "safe"))
    request = dataclasses.replace(request, skip=withdrawn)
    held: dict[str, frozenset[tuple[str, int, int]]] = {}
    run = _lint_once(candidates, request, setup, withdrawn=held, reuse=_unfixable(own, request))
    from loadlint.project.fixing import write

    # What earlier rounds applied, by path: the last round's results say the rest.
    earlier: dict[str, FileResult] = {}
    for _ in range(FIX_ROUNDS):
        if not write(run.results, request.unsafe, read_as, setup.staging):
            # The files are as the last project phase read them: a fix it no longer
            # holds back (workers that would crash a script since guarded) is free.
            if all(places <= held.get(path, frozenset()) for path, places in request.skip.items()):
                break
            request = dataclasses.replace(request, skip=held)
        for result in run.results:
            if result.applied or result.fixed is not None:
                earlier.setdefault(result.path, FileResult(result.path)).carry(result)
        held = {}
        run = _lint_once(candidates, request, setup.quiet(), withdrawn=held)
    for result in run.results:
        before = earlier.pop(result.path, None)
        if before is not None:
            before.carry(result)
            result.applied, result.fixed = before.applied, before.fixed
    if earlier:
        # Files fixed in an earlier round with nothing left to say.
        fixed, run = run, Run.of(run.results + list(earlier.values()))
        run.files, run.parsed = fixed.files, fixed.parsed
    run.later = max(0, sum(sum(r.applied.values()) for r in run.results) - offered)
    return run


def _lint_once(
    candidates: Iterable[Candidate],
    request: FixRequest | None,
    setup: _Setup,
    *,
    project: bool = True,
    withdrawn: dict[str, frozenset[tuple[str, int, int]]] | None = None,
    own: dict[int, FileResult] | None = None,
    reuse: dict[int, FileResult] | None = None,
) -> Run:
    """One pass of ``lint_candidates``: per file, then the project.
    ``own`` gets a copy of each file's result before the project phase
    changes it (by candidate index); ``reuse`` gives results to take as
    they are, the files not read or parsed again."""
    cache, progress, profiles = setup.cache, setup.progress, setup.profiles
    candidates = list(candidates)
    results: list[FileResult | None] = [None] * len(candidates)
    work: list[Work] = []
    open_cache: Cache | None = None
    profile_keys: dict[Target, str] = {}

    def profile_key_for(target: Target) -> str:
        key = profile_keys.get(target)
        if key is None:
            from loadlint.workspace.cache import profile_key

            key = profile_keys[target] = profile_key(profiles.get(target)())
        return key

    # Not in a dry run: its staged texts are not on disk.
    staging = setup.staging
    away = TurnedAway(open_cache := cache()) if cache is not None and staging is None else None
    # The project phase searches the same files' bytes; not when fixing, which rewrites them.
    kept = KeptBytes(KEEP_BYTES, staging) if project and request is None else None
    read = staging.read_resolved if staging is not None else read_resolved
    for index, candidate in enumerate(candidates):
        if reuse is not None and index in reuse:
            results[index] = reuse[index]
            continue
        path = str(candidate.path)
        notebook = path.endswith(".ipynb")
        if away is not None and not notebook and away.still(path):
            continue
        try:
            real, data = read(candidate.path, within=candidate.within)
        except OSError as exc:
            results[index] = pipeline.unreadable(path, exc, options_for(candidate.settings, path, profiles))
            continue
        if kept is not None:
            kept.keep(path, real, data)
        if not notebook and not passes_prefilter(data) and not undecodable(data):
            if away is not None:
                away.add(path)
            continue  # cannot construct a DataLoader: nothing to parse
        item = Work(index, candidate, data)
        if cache is not None:
            if open_cache is None:
                open_cache = cache()
            from loadlint.workspace.cache import content_hash

            item.digest = content_hash(data)
            item.fingerprint = candidate.settings.fingerprint(path)
            entry = open_cache.load(path, item.fingerprint, item.digest)
            if entry is not None and (entry.profile is None or entry.profile == profile_key_for(candidate.settings.target)):
                if request is None or not _has_applicable_fix(entry.findings, request):
                    open_cache.hits += 1
                    hit = _from_cache(path, data, entry.findings, fixing=request is not None, notebook=notebook)
                    hit.summary_json = entry.summary_json
                    hit.cell_sources = entry.cells
                    results[index] = hit
                    continue
        work.append(item)

    if away is not None:
        away.store(str(c.path) for c in candidates)
    if progress is not None:
        progress.total = len(work)
    with fewer_collections():
        done = run_pool(work, profiles, request, setup.jobs, progress, setup.pool_min_saving)
    for item, (result, consulted) in done:
        results[item.index] = result
        if result.source is None and result.findings and item.data is not None and not item.notebook:
            # A worker sends no text back: the report quotes the lines from here.
            result.source = _decoded(item.data)
        if open_cache is None or item.digest is None or item.fingerprint is None:
            continue
        if result.error is None and result.fixed is None and not any(f.message.startswith(OUT_OF_TIME) for f in result.findings):
            profile = profile_key_for(item.candidate.settings.target) if consulted else None
            open_cache.store(
                str(item.candidate.path), item.fingerprint, item.digest, profile, result.findings, result.summary,
                result.cell_sources,
            )
    if progress is not None:
        progress.close()
    if staging is not None and request is not None:
        from loadlint.project.fixing import stage_fixed

        stage_fixed([r for r in results if r is not None], staging)
    if own is not None:
        own.update((i, _copied(r)) for i, r in enumerate(results) if r is not None)
    if project:
        from loadlint.project.join import join_project

        with fewer_collections():
            join_project(candidates, results, profiles, cache, withdrawn, kept, staging=staging, read_as=setup.read_as)

    run = Run.of([r for r in results if r is not None])
    run.files = len(candidates)
    run.parsed = len(work)
    return run


#: Bytes of the files read kept for the project phase, at most: a large
#: monorepo's sources would otherwise stay in memory the whole run.
KEEP_BYTES = 64 * 1024 * 1024


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Parsing allocates millions of short-lived nodes, which libcst frees by
    reference counting: the cyclic collector's default pace (a young
    collection every 700 allocations) costs about 5 % of the run for
    nothing.  Workers forked inside inherit the pace; the caller's is
    restored after."""
    before = gc.get_threshold()
    gc.set_threshold(50_000, 20, 50)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _copied(result: FileResult) -> FileResult:
    """A copy the project phase leaves alone: it adds and removes findings and withholds their fixes."""
    return dataclasses.replace(result, findings=[dataclasses.replace(f) for f in result.findings])


def _unfixable(own: dict[int, FileResult], request: FixRequest) -> dict[int, FileResult]:
    """The check pass's results that fixing would leave as they are: no fix
    the request applies (as a cache hit is taken), no error, no time-out, not
    a notebook.  The fix pass takes them instead of parsing their files again,
    and its project phase their summaries instead of making them again."""
    return {
        index: result
        for index, result in own.items()
        if result.error is None and not result.path.endswith(".ipynb") and not _has_applicable_fix(result.findings, request)
        and not any(f.message.startswith(OUT_OF_TIME) for f in result.findings)
    }


def _has_applicable_fix(findings: list[Finding], request: FixRequest) -> bool:
    return any(f.fix is not None and (request.unsafe or f.fix.applicability == "safe") for f in findings)


def _from_cache(path: str, data: bytes, findings: list[Finding], *, fixing: bool, notebook: bool) -> FileResult:
    result = FileResult(path, findings=findings)
    if (findings or fixing) and not notebook:
        # The report quotes the offending lines; the text is the one hashed.
        result.source = _decoded(data)
    return result


def _decoded(data: bytes) -> Source | None:
    from loadlint.sources.source import DecodeError, decode

    try:
        return decode(data)
    except DecodeError:
        return None
