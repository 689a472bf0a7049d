"""The per-file work of a run, here or in a pool of processes.

Each file is checked by :mod:`loadlint.engine.pipeline` within a time
limit.  When there is enough to pay for starting processes, ``jobs - 1``
workers are forked (on Linux after libcst and the rules are imported and
the hardware profile is resolved, so none of that is paid again per
worker) and this process checks files beside them: the largest files go to
the workers first, so one big file does not finish last on its own, the
smallest are checked here between looks at the workers' results.
"""

from __future__ import annotations

import dataclasses
import gc
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from loadlint import processes
from loadlint.hardware import cpus
from loadlint.engine import pipeline
from loadlint.engine.pipeline import ProfileCache, options_for
from loadlint.run.deadline import OutOfTime, time_limit
from loadlint.run.progress import Progress
from loadlint.rules import name_of
from loadlint.workspace.discover import Candidate
from loadlint.types import FileResult, Finding, FixRequest, HardwareProfile, Location, Options, Target

if TYPE_CHECKING:
    from concurrent.futures import Future

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


def default_jobs() -> int:
    """Worker processes when --jobs is not given: the usable CPUs."""
    return cpus.usable_here()


@dataclasses.dataclass
class Work:
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


def _pays_for_pool(work: list[Work], jobs: int, min_saving: int) -> bool:
    if jobs < 2 or len(work) < 2:
        return False
    sizes = [item.size or 4096 for item in work]
    total = sum(sizes)
    # Largest first on ``jobs`` workers finishes no sooner than the largest
    # file or an even share of the bytes, whichever is later.
    parallel = max(max(sizes), total / jobs)
    return total - parallel >= min_saving


def run_pool(
    work: list[Work],
    profiles: ProfileCache,
    request: FixRequest | None,
    jobs: int | None,
    progress: Progress | None,
    min_saving: int,
) -> list[tuple[Work, Done]]:
    """``jobs`` processes: this one and ``jobs - 1`` forked workers.  This
    one checks files too rather than wait on the others: a worker less to
    start and warm up (2 to 6 % of a cold run's CPU on Lightning, and a
    tenth of a second of its wall time)."""
    jobs = jobs if jobs and jobs > 0 else default_jobs()
    jobs = min(jobs, len(work))
    if not _pays_for_pool(work, jobs, min_saving):
        return list(_run_here(work, profiles, request, progress))

    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool

    _preload(profiles, {item.candidate.settings.target for item in work})
    # Largest first to the workers, smallest first here: this process
    # checks short files between its looks at the workers' results.
    pending = sorted(work, key=lambda item: -item.size)
    done: dict[int, Done] = {}
    workers = jobs - 1
    running: dict[Future[Done], Work] = {}

    def collect(finished: Iterable[Future[Done]]) -> None:
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

    # What the workers inherit stays out of their collections: a collection
    # touching it would copy the pages it lies on into every worker.  Only
    # when nothing is frozen yet: ``gc.unfreeze`` thaws everything, and what
    # a host program froze is not ours to thaw.
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    try:
        with processes.pool(workers, START_METHOD, _init_worker, (profiles, request)) as executor:
            while pending or running:
                # The bytes being parsed (or queued: a worker's next file waits
                # beside it) stay within the budget; a file that does not fit
                # waits for a smaller neighbour to finish rather than doubling the peak.
                while pending and len(running) < QUEUED_PER_WORKER * workers:
                    pick = _fitting(pending, running.values(), range(len(pending)))
                    if pick is None:
                        break
                    item = pending.pop(pick)
                    running[executor.submit(_work_in_worker, item.candidate, item.data)] = item
                here = _fitting(pending, running.values(), range(len(pending) - 1, -1, -1)) if pending else None
                if here is not None:
                    item = pending.pop(here)
                    done[item.index] = lint_one(item.candidate, item.data, profiles, request)
                    if progress is not None:
                        progress.advance()
                    collect([future for future in running if future.done()])
                elif running:
                    collect(wait(running, return_when=FIRST_COMPLETED)[0])
    except BrokenProcessPool:
        pass  # a worker died (killed, out of memory): the rest is done here
    finally:
        if freeze:
            gc.unfreeze()
    rest = [item for item in work if item.index not in done]
    out = [(item, done[item.index]) for item in work if item.index in done]
    out.extend(_run_here(rest, profiles, request, progress))
    return out


#: Files handed to each worker at once: the one it checks and its next, so
#: that it never waits for this process to finish a file of its own.
QUEUED_PER_WORKER = 2


def _fitting(pending: list[Work], running: Iterable[Work], order: Iterable[int]) -> int | None:
    """The first index of ``order`` whose file fits ``IN_FLIGHT_BYTES``
    beside the files ``running``; when none runs, the first of all (a file
    larger than the budget runs alone)."""
    running = list(running)
    busy = sum(item.size for item in running)
    indexes = list(order)
    pick = next((i for i in indexes if busy + pending[i].size <= IN_FLIGHT_BYTES), None)
    return indexes[0] if pick is None and not running and indexes else pick


#: How worker processes start (``loadlint.processes`` isolates them
#: whatever the method); fork also shares the parent's imports and resolved
#: profile for free (a test sets "spawn" to exercise the other path).
START_METHOD = processes.START_METHOD


def _run_here(
    work: list[Work], profiles: ProfileCache, request: FixRequest | None, progress: Progress | None
) -> Iterator[tuple[Work, Done]]:
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
