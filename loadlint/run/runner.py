"""Runs a check or fix over many files (discovery, cache, pool, the
per-file work of :mod:`loadlint.engine.pipeline`) for the API and the CLI.
Where the time goes, and what this module does about it:

* Most files of a repository never mention ``DataLoader``.  They are read
  and tested for the pre-filter words here, in the parent, and never reach
  the engine.  The cache records them with their size, modification time
  and inode: a later run skips them unread while those hold.
* A file that passes is looked up in the cache (:mod:`loadlint.workspace.cache`) by
  its content hash; a hit costs a small JSON read instead of a parse.
* What is left is parsed, in a pool of worker processes when there is
  enough of it to pay for starting one (largest files first, so one big
  file does not finish last on its own), otherwise right here.  Workers are
  forked on Linux after libcst and the rules are imported and the hardware
  profile is resolved, so none of that is paid again per worker.
Results are sorted by path: the report is the same whatever the pool or the cache did.
"""

from __future__ import annotations

import dataclasses
import gc
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, TextIO

from loadlint.hardware import cpus

from loadlint.engine import pipeline
from loadlint.workspace.config import Resolver
from loadlint.run.deadline import OutOfTime, time_limit
from loadlint.workspace.discover import Candidate, discover
from loadlint.sources.prefilter import passes_prefilter
from loadlint.sources.files import read_source, staging, staging_now
from loadlint.engine.pipeline import ProfileCache, Target, options_for
from loadlint.run.progress import Progress
from loadlint.cst.slicing import fast_nodes
from loadlint.rules import name_of
from loadlint.workspace.cache import TurnedAway, lazy_cache
from loadlint.types import HUMAN_FORMATS, CheckOptions, FileResult, Finding, FixRequest, HardwareProfile, Location, Options, Run

if TYPE_CHECKING:
    from concurrent.futures import Future

    from loadlint.workspace.cache import Cache
    from loadlint.sources.source import Source

#: Bytes of source the engine gets through in about 0.1 s on one core:
#: below this saving, starting a pool costs more than it saves.
POOL_MIN_SAVING = 48 * 1024

#: Source bytes the pool parses at once.  A libcst tree costs about 300
#: bytes of memory per byte of source (transformers' 230 KB trainer.py
#: peaks at 66 MB), so two large files side by side would take a run past
#: its memory budget; a file larger than this runs with small ones only.
IN_FLIGHT_BYTES = 256 * 1024

#: After a file this large a worker hands its freed memory back to the
#: system: glibc keeps it otherwise, and every worker would stay as large
#: as the largest file it ever parsed.  Not after smaller ones: the next
#: file reuses that memory, and taking it back from the system costs page
#: faults (trimming after every 32 KB file doubled them on Lightning).
TRIM_BYTES = 128 * 1024

def lint_paths(paths: list[Path], resolver: Resolver, options: CheckOptions, request: FixRequest | None, fmt: str) -> Run:
    """The command line's run over ``paths``: cache and pool as ``options``
    ask, progress on a terminal's stderr for the human formats."""
    show_progress = fmt in HUMAN_FORMATS and not options.quiet and _is_tty(sys.stderr)
    return lint_candidates(
        discover(paths, resolver.for_path, force_exclude=options.force_exclude),
        request,
        cache=None if options.no_cache else lazy_cache(options.cache_dir),
        jobs=options.jobs,
        progress=Progress(sys.stderr) if show_progress else None,
    )


def _is_tty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def default_jobs() -> int:
    """Worker processes when --jobs is not given: the usable CPUs."""
    return cpus.usable_here()


@dataclasses.dataclass
class _Work:
    index: int
    candidate: Candidate
    #: None: the pipeline reads the file itself.
    data: bytes | None
    digest: str | None = None
    fingerprint: str | None = None

    @property
    def notebook(self) -> bool:
        return str(self.candidate.path).endswith(".ipynb")

    @property
    def size(self) -> int:
        return len(self.data) if self.data is not None else 0


class _Recorder:
    """A profile factory that remembers whether a rule asked for the
    profile: a finding that did not depend on the hardware can be cached
    without it, and a warm run then never has to probe the machine."""

    def __init__(self, factory: Callable[[], HardwareProfile]) -> None:
        self.factory = factory
        self.used = False

    def __call__(self) -> HardwareProfile:
        self.used = True
        return self.factory()


#: A file's result, and whether its findings depended on the hardware profile.
Done = tuple[FileResult, bool]


#: Seconds one file's analysis (or fix) may take before it is abandoned and
#: reported (LL900) rather than hanging the run: a bound on any input.
FILE_TIME_LIMIT = 60.0


#: How an abandoned file's finding starts (such a result is never cached:
#: a busy machine's verdict).
OUT_OF_TIME = "analysis did not finish within"


def lint_one(candidate: Candidate, data: bytes | None, profiles: ProfileCache, request: FixRequest | None) -> Done:
    """(result, whether the profile was consulted) for one file; ``data``
    None means the pipeline reads the file itself (a notebook).  A file
    that takes longer than ``FILE_TIME_LIMIT`` is reported, not waited for."""
    base = options_for(candidate.settings, str(candidate.path), profiles)
    try:
        with time_limit(FILE_TIME_LIMIT):
            return _lint_one(candidate, data, profiles, request, base)
    except OutOfTime:
        path = str(candidate.path)
        result = FileResult(path)
        if "LL900" in base.select:
            message = f"{OUT_OF_TIME} {FILE_TIME_LIMIT:g} s; split the module or exclude it"
            result.findings.append(Finding("LL900", name_of("LL900"), message, path, Location(1, 1), Location(1, 2)))
        return result, False


def _lint_one(
    candidate: Candidate, data: bytes | None, profiles: ProfileCache, request: FixRequest | None, base: Options
) -> Done:
    if data is None:
        return pipeline.check_path(candidate.path, base, request), True
    recorder = _Recorder(base.profile_factory)
    options = dataclasses.replace(base, profile_factory=recorder)
    return pipeline.check_bytes(data, candidate.path, options, request), recorder.used


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
    with staging() as staged:
        run = _fix_rounds(candidates, request, setup)
        written = dict(staged)
    from loadlint.project.fixing import diff_from_disk

    diff_from_disk(run.results, written)  # read outside the staging: the disk
    return run


def _fix_rounds(candidates: list[Candidate], request: FixRequest, setup: _Setup) -> Run:
    # A fix the project takes back (LL201 on a dataset held in memory by
    # another module) is not for the per-file pass to apply.
    withdrawn: dict[str, frozenset[tuple[str, int, int]]] = {}
    checked = _lint_once(candidates, None, setup.quiet(), withdrawn=withdrawn)
    # What check offered: the summary says how many more the fixes made possible.
    offered = sum(1 for f in checked.findings if f.fix and (request.unsafe or f.fix.applicability == "safe"))
    request = dataclasses.replace(request, skip=withdrawn)
    held: dict[str, frozenset[tuple[str, int, int]]] = {}
    run = _lint_once(candidates, request, setup, withdrawn=held)
    from loadlint.project.fixing import write

    # What earlier rounds applied, by path: the last round's results say the rest.
    earlier: dict[str, FileResult] = {}
    for _ in range(FIX_ROUNDS):
        if not write(run.results, request.unsafe, dry_run=request.dry_run):
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
) -> Run:
    """One pass of ``lint_candidates``: per file, then the project."""
    cache, progress, profiles = setup.cache, setup.progress, setup.profiles
    candidates = list(candidates)
    results: list[FileResult | None] = [None] * len(candidates)
    work: list[_Work] = []
    open_cache: Cache | None = None
    profile_keys: dict[Target, str] = {}

    def profile_key_for(target: Target) -> str:
        key = profile_keys.get(target)
        if key is None:
            from loadlint.workspace.cache import profile_key

            key = profile_keys[target] = profile_key(profiles.get(target)())
        return key

    # Not in a dry run: its staged texts are not on disk.
    away = TurnedAway(open_cache := cache()) if cache is not None and not staging_now() else None
    for index, candidate in enumerate(candidates):
        path = str(candidate.path)
        notebook = path.endswith(".ipynb")
        if away is not None and not notebook and away.still(path):
            continue
        try:
            data = read_source(candidate.path, within=candidate.within)
        except OSError as exc:
            results[index] = pipeline.unreadable(path, exc, options_for(candidate.settings, path, profiles))
            continue
        if not notebook and not passes_prefilter(data):
            if away is not None:
                away.add(path)
            continue  # cannot construct a DataLoader: nothing to parse
        item = _Work(index, candidate, data)
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
        done = _run_pool(work, profiles, request, setup.jobs, progress, setup.pool_min_saving)
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
    if staging_now() and request is not None:
        from loadlint.project.fixing import stage_fixed

        stage_fixed([r for r in results if r is not None])
    if project:
        from loadlint.project.join import join_project

        with fewer_collections():
            join_project(candidates, results, profiles, cache, withdrawn)

    run = Run.of([r for r in results if r is not None])
    run.files = len(candidates)
    run.parsed = len(work)
    return run


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


# -- the pool --------------------------------------------------------------

_worker_state: tuple[ProfileCache, FixRequest | None] | None = None


def _init_worker(profiles: ProfileCache, request: FixRequest | None) -> None:
    import signal

    global _worker_state
    # Ctrl-C is the parent's to handle; a worker dying of it mid-file would
    # only turn into a broken pool and a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker_state = (profiles, request)


def _work_in_worker(candidate: Candidate, data: bytes | None) -> Done:
    assert _worker_state is not None
    profiles, request = _worker_state
    result, consulted = lint_one(candidate, data, profiles, request)
    if request is None:
        # The parent decodes the text again if the report needs it; sending
        # every parsed file's text back through a pipe would cost more.
        result.source = None
    if data is None or len(data) >= TRIM_BYTES:
        _trim()
    return result, consulted


_malloc_trim: Callable[[int], int] | None | bool = None


def _trim() -> None:
    global _malloc_trim
    if _malloc_trim is None:
        _malloc_trim = False
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                _malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
            except (OSError, AttributeError):
                pass  # not glibc (musl): nothing to hand back this way
    if callable(_malloc_trim):
        _malloc_trim(0)


def _pays_for_pool(work: list[_Work], jobs: int, min_saving: int) -> bool:
    if jobs < 2 or len(work) < 2:
        return False
    sizes = [item.size or 4096 for item in work]
    total = sum(sizes)
    # Largest first on ``jobs`` workers finishes no sooner than the largest
    # file or an even share of the bytes, whichever is later.
    parallel = max(max(sizes), total / jobs)
    return total - parallel >= min_saving


def _run_pool(
    work: list[_Work],
    profiles: ProfileCache,
    request: FixRequest | None,
    jobs: int | None,
    progress: Progress | None,
    min_saving: int,
) -> list[tuple[_Work, Done]]:
    jobs = jobs if jobs and jobs > 0 else default_jobs()
    jobs = min(jobs, len(work))
    if not _pays_for_pool(work, jobs, min_saving):
        return list(_run_here(work, profiles, request, progress))

    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    _preload(profiles, {item.candidate.settings.target for item in work})
    context = multiprocessing.get_context(START_METHOD)
    restore = _isolate_spawn() if START_METHOD != "fork" else None
    pending = sorted(work, key=lambda item: -item.size)
    done: dict[int, Done] = {}
    executor = ProcessPoolExecutor(jobs, mp_context=context, initializer=_init_worker, initargs=(profiles, request))
    running: dict[Future[Done], _Work] = {}
    # What the workers inherit stays out of their collections: a collection
    # touching it would copy the pages it lies on into every worker.  Only
    # when nothing is frozen yet: ``gc.unfreeze`` thaws everything, and what
    # a host program froze is not ours to thaw.
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    try:
        while pending or running:
            # Largest first, as long as the bytes being parsed stay within
            # the budget; a file that does not fit waits for a smaller
            # neighbour to finish rather than doubling the peak.
            while pending and len(running) < jobs:
                busy = sum(item.size for item in running.values())
                pick = next((i for i, item in enumerate(pending) if busy + item.size <= IN_FLIGHT_BYTES), None)
                if pick is None:
                    if running:
                        break
                    pick = 0
                item = pending.pop(pick)
                running[executor.submit(_work_in_worker, item.candidate, item.data)] = item
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                item = running.pop(future)
                try:
                    done[item.index] = future.result()
                except BrokenProcessPool:
                    raise
                except Exception as exc:  # never lose a file to a pickling or pool error
                    error = f"internal error: {type(exc).__name__}: {exc}"
                    done[item.index] = (FileResult(str(item.candidate.path), error=error), False)
                if progress is not None:
                    progress.advance()
    except BrokenProcessPool:
        pass  # a worker died (killed, out of memory): the rest is done here
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        if freeze:
            gc.unfreeze()
        if restore is not None:
            restore()
    rest = [item for item in work if item.index not in done]
    out = [(item, done[item.index]) for item in work if item.index in done]
    out.extend(_run_here(rest, profiles, request, progress))
    return out


#: How worker processes start.  fork shares the parent's imports and
#: resolved profile for free; where fork is unsafe (macOS) or missing,
#: workers start from scratch (a test sets "spawn" to exercise that path).
START_METHOD = "fork" if sys.platform.startswith("linux") else "spawn"


def _isolate_spawn() -> Callable[[], None]:
    """Start spawned workers isolated from the current folder; returns the undo.

    multiprocessing starts a worker as ``python -c ...``, which puts the
    current folder first on the import path: a ``multiprocessing/`` package
    at the root of the checked repository would run in every worker before
    a line of ours.  ``-I`` keeps it off; the parent's path, which the worker
    takes over next, goes without its implicit ``""`` too."""
    import multiprocessing.spawn as spawn
    import multiprocessing.util as util

    # The flags every interpreter multiprocessing starts is given: the
    # workers' and the resource tracker's (also ``python -c``).
    flags: Callable[[], list[str]] = getattr(util, "_args_from_interpreter_flags")
    preparation = spawn.get_preparation_data

    def isolated_flags() -> list[str]:
        given = list(flags())
        return given if "-I" in given else [*given, "-I"]

    def preparation_data(name: str) -> dict[str, Any]:
        data = dict(preparation(name))
        # "" is the current folder as ``-c`` or a prompt put it there, not as anyone chose.
        data["sys_path"] = [p for p in data.get("sys_path", []) if p != ""]
        return data

    setattr(util, "_args_from_interpreter_flags", isolated_flags)
    spawn.get_preparation_data = preparation_data

    def restore() -> None:
        setattr(util, "_args_from_interpreter_flags", flags)
        spawn.get_preparation_data = preparation

    return restore


def _run_here(
    work: list[_Work], profiles: ProfileCache, request: FixRequest | None, progress: Progress | None
) -> Iterator[tuple[_Work, Done]]:
    for item in work:
        result = lint_one(item.candidate, item.data, profiles, request)
        if progress is not None:
            progress.advance()
        yield item, result


def _preload(profiles: ProfileCache, targets: set[Target]) -> None:
    """Import what every worker needs and resolve the profiles, once."""
    try:
        import libcst  # noqa: F401

        import loadlint.engine.fixes  # noqa: F401
        from loadlint.facts.collect import prepare
        from loadlint.rules import all_rules

        all_rules()
        prepare()
    except Exception:
        pass  # a worker meets the same error and reports it per file
    for target in targets:
        try:
            profiles.get(target)()
        except Exception:
            pass
