"""The library API the command line, the language server and the flake8
plugin share: check or fix paths and sources, never raising for one bad file.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from loadlint.config import Overrides, Resolver, Settings
from loadlint.discover import Candidate, discover
from loadlint.engine import FileResult, FixFailed, Options, analyse, fix_text, lint_bytes, passes_prefilter
from loadlint.source import DecodeError, decode
from loadlint.types import Finding, HardwareProfile, Location


class ProfileCache:
    """One hardware profile per distinct target; detection runs at most once."""

    def __init__(self) -> None:
        self._profiles: dict[tuple, HardwareProfile] = {}
        self._detected: HardwareProfile | None = None

    def get(self, target: tuple) -> Callable[[], HardwareProfile]:
        def factory() -> HardwareProfile:
            profile = self._profiles.get(target)
            if profile is None:
                from loadlint.hardware import resolve_profile

                profile = resolve_profile(dict(target) or None, detector=self._detect)
                self._profiles[target] = profile
            return profile

        return factory

    def _detect(self, **kwargs: Any) -> HardwareProfile:
        from loadlint.hardware import detect

        if self._detected is None or kwargs.get("nvml", True) and self._detected.gpu_count is None:
            self._detected = detect(**kwargs)
        return self._detected


@dataclass
class FixRequest:
    unsafe: bool = False
    #: Compute fixes but write nothing (--diff).
    dry_run: bool = False


@dataclass
class Run:
    results: list[FileResult] = field(default_factory=list)
    #: Files that were considered (after discovery), for statistics.
    files: int = 0
    parsed: int = 0

    @property
    def findings(self) -> list[Finding]:
        return [f for r in self.results for f in r.findings]

    @property
    def errors(self) -> list[FileResult]:
        return [r for r in self.results if r.error]


def options_for(settings: Settings, path: str, profiles: ProfileCache) -> Options:
    return Options(select=settings.codes_for(path), profile_factory=profiles.get(settings.target))


def check_file(candidate: Candidate, profiles: ProfileCache, fix: FixRequest | None = None) -> FileResult:
    path = str(candidate.path)
    options = options_for(candidate.settings, path, profiles)
    try:
        data = read_source(candidate.path)
    except OSError as exc:
        result = FileResult(path)
        if "LL901" in options.select:
            reason = exc.strerror or type(exc).__name__
            result.findings.append(
                Finding("LL901", "unreadable-file", f"cannot read file: {reason}", path, Location(1, 1), Location(1, 2))
            )
        return result
    if path.endswith(".ipynb"):
        return _check_notebook(candidate, data, options, fix)
    if fix is None:
        return lint_bytes(data, path, options)
    return _fix_file(candidate.path, data, options, fix)


def read_source(path: Path) -> bytes:
    """A file's bytes.  A FIFO, device or socket is refused, not read: it
    could block forever or never end (opened non-blocking, so a FIFO
    without a writer cannot hang the open either)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return handle.read()


def _check_notebook(candidate: Candidate, data: bytes, options: Options, fix: FixRequest | None) -> FileResult:
    try:
        from loadlint import notebook
    except ImportError:
        return FileResult(str(candidate.path))
    return notebook.check(candidate.path, data, options, fix)


def _fix_file(
    path: Path, data: bytes, options: Options, request: FixRequest, external: Any = None
) -> FileResult:
    """Fix one file read as ``data``; write it back unless ``request.dry_run``.

    Any failure leaves the file as it was and is reported on the result
    (``error``), with the findings of the unfixed text.
    """
    result = FileResult(str(path))
    if external is None and not passes_prefilter(data):
        return result
    try:
        source = decode(data)
    except DecodeError:
        return lint_bytes(data, str(path), options)
    result.source = source
    try:
        fixed, findings, applied = fix_text(source.text, str(path), options, unsafe=request.unsafe, external=external)
        new_bytes = source.encode(fixed)
    except (FixFailed, UnicodeEncodeError) as exc:
        result.findings, _ = analyse(source.text, str(path), options)
        result.error = str(exc) if isinstance(exc, FixFailed) else f"fixed code cannot be written as {source.encoding}"
        return result
    except Exception as exc:  # never crash the run over one file
        result.error = f"internal error while fixing: {type(exc).__name__}: {exc}"
        return result
    result.findings = findings
    result.applied = applied
    if fixed != source.text:
        result.fixed = fixed
        if not request.dry_run:
            try:
                write_atomic(path, data, new_bytes)
            except FileChanged:
                result.error = "file changed on disk while it was being fixed; not written"
                result.fixed = None
            except OSError as exc:
                result.error = f"cannot write fixes: {exc.strerror or exc}"
                result.fixed = None
            if result.fixed is None:
                # Nothing was written: report the file as it is.
                result.applied = {}
                result.findings, _ = analyse(source.text, str(path), options)
    return result


class FileChanged(Exception):
    """The file on disk no longer holds the bytes the fixes were made from."""


TEMP_SUFFIX = ".loadlint-tmp"
#: What follows ".<file name>." in a temporary file's name: pid, mkstemp's letters.
_TEMP_NAME = re.compile(r"([0-9]+)\.[a-z0-9_]+" + re.escape(TEMP_SUFFIX))


def remove_stale_temps(path: Path) -> None:
    """Remove the temporary files of ``path`` whose writer is gone.

    A run killed (SIGKILL, power loss) between creating its temporary file
    and renaming it over the original leaves it behind; no handler can run
    then, so the next fix of the file cleans up.  A file whose process is
    alive (or whose name is not ours) is left alone.
    """
    prefix = f".{path.name}."
    try:
        names = os.listdir(path.parent)
    except OSError:
        return
    for name in names:
        if not name.startswith(prefix):
            continue
        match = _TEMP_NAME.fullmatch(name, len(prefix))
        if match is None or _alive(int(match.group(1))):
            continue
        try:
            os.unlink(path.parent / name)
        except OSError:
            pass


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # exists but not ours, or cannot tell: keep its file
    return True


def write_atomic(path: Path, original: bytes, new: bytes) -> None:
    """Replace ``path`` with ``new`` all at once: a temporary file in the same
    folder, flushed to disk, then renamed over the original (keeping its
    mode).  Refuses when the file no longer holds ``original``, so a change
    made by someone else since we read it is never overwritten.

    A symbolic link is followed: its target is rewritten and the link stays.
    """
    path = Path(os.path.realpath(path))
    directory = path.parent
    mode = stat.S_IMODE(os.stat(path).st_mode)
    # The mode bits count too: a file nobody may write is meant to stay as it
    # is, even for a user (root) whom os.access lets write anything.
    if not os.access(path, os.W_OK) or not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise PermissionError(13, "file is read-only")
    import tempfile  # only fixing needs it; start-up should not pay for it

    remove_stale_temps(path)
    # The writer's process id in the name: a later run can tell a file a
    # killed run left behind from one that a running fix is about to rename.
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=TEMP_SUFFIX, dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(new)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if path.read_bytes() != original:
            raise FileChanged(str(path))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    # The rename is durable only once the folder's entry is on disk.
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def check_paths(
    paths: Iterable[Path],
    overrides: Overrides | None = None,
    *,
    config: Path | None = None,
    isolated: bool = False,
    force_exclude: bool = False,
    fix: FixRequest | None = None,
    resolver: Resolver | None = None,
    profiles: ProfileCache | None = None,
) -> Run:
    """Check (or fix) files and folders; one FileResult per file."""
    resolver = resolver or Resolver(overrides or Overrides(), config, isolated)
    profiles = profiles or ProfileCache()
    run = Run()
    for candidate in discover(list(paths), resolver.for_path, force_exclude=force_exclude):
        run.files += 1
        result = check_file(candidate, profiles, fix)
        if result.findings or result.error or result.fixed is not None:
            run.results.append(result)
    run.results.sort(key=lambda r: r.path)
    return run


def check_source(
    text: str,
    path: str = "<stdin>",
    *,
    settings: Settings | None = None,
    profile: HardwareProfile | None = None,
    select: Iterable[str] | None = None,
) -> list[Finding]:
    """Findings for source text (the language server and tests use this)."""
    settings = settings or Settings()
    codes = frozenset(select) if select is not None else settings.codes_for(path)
    factory = (lambda: profile) if profile is not None else ProfileCache().get(settings.target)
    findings, _ = analyse(text, path, Options(codes, factory))  # type: ignore[arg-type]
    return findings


def fix_source(
    text: str,
    path: str = "<stdin>",
    *,
    settings: Settings | None = None,
    profile: HardwareProfile | None = None,
    unsafe: bool = False,
) -> tuple[str, list[Finding]]:
    settings = settings or Settings()
    factory = (lambda: profile) if profile is not None else ProfileCache().get(settings.target)
    fixed, findings, _ = fix_text(text, path, Options(settings.codes_for(path), factory), unsafe=unsafe)  # type: ignore[arg-type]
    return fixed, findings


def suggest_for_call(path: str, line: int, profile: HardwareProfile) -> dict[str, Any] | None:
    """The keyword arguments of the DataLoader call starting on ``line`` as
    ``loadlint fix`` (safe fixes) would write it: parameter -> value, removed
    arguments absent, a value that cannot be resolved statically as
    ``loadlint.resolve.UNKNOWN``.  None when no call starts on that line.

    ``loadlint verify`` measures this configuration against the current one.
    """
    from loadlint.resolve import UNKNOWN, evaluate

    data = Path(path).read_bytes()
    text = decode(data).text
    settings = Resolver(Overrides()).for_path(Path(path))
    options = Options(settings.codes_for(path), lambda: profile)
    _, before = analyse(text, path, options)
    if before is None:
        return None
    index = next((i for i, row in _call_rows(before) if row == line), None)
    if index is None:
        return None
    fixed, _, _ = fix_text(text, path, options, unsafe=False)
    _, after = analyse(fixed, path, options)
    if after is None:
        return None
    call = after.info.calls[index]  # fixes never add or remove DataLoader calls
    out: dict[str, Any] = {}
    for name, arg in call.args.items():
        out[name] = evaluate(arg.value, call.scope)
    for name, (expr, scope) in call.dict_args.items():
        out[name] = UNKNOWN if expr is None else evaluate(expr, scope)
    return out


def _call_rows(analysis) -> list[tuple[int, int]]:
    return [(i, analysis.positions.range(call.node)[0].row) for i, call in enumerate(analysis.info.calls)]
