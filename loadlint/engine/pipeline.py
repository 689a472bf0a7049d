"""One file, checked or fixed: the step every entry point shares.

The library API, the runner (and its worker processes), stdin, ``fix
--from-verify``, the flake8 plugin and the language server all come here
with a path or bytes, the options, and an optional fix request, and get a
``FileResult`` back.  Nothing here raises for one bad file: an unreadable
file is LL901, a failed fix an ``error`` on the result.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from loadlint.engine import notebook
from loadlint.workspace.config import Settings
from loadlint.engine.analysis import analyse, engine_finding
from loadlint.engine.decision import FixFailed, SpecSource, decided_findings, fix_text
from loadlint.sources.prefilter import passes_prefilter, undecodable
from loadlint.sources.files import read_source, write_fixes
from loadlint.sources.source import DecodeError, decode
from loadlint.types import FileResult, Finding, FixRequest, HardwareProfile, Location, Options, Summary, Target

class ProfileCache:
    """One hardware profile per distinct target: the declared keys alone,
    never this machine's (``hardware.detect.rules_profile``)."""

    def __init__(self) -> None:
        self._profiles: dict[Target, HardwareProfile] = {}

    def get(self, target: Target) -> Callable[[], HardwareProfile]:
        """A factory resolving ``target``'s profile on first call."""

        def factory() -> HardwareProfile:
            profile = self._profiles.get(target)
            if profile is None:
                from loadlint.hardware.detect import rules_profile

                profile = rules_profile(target)
                self._profiles[target] = profile
            return profile

        return factory


def options_for(settings: Settings, path: str, profiles: ProfileCache) -> Options:
    """The options ``settings`` give the file at ``path``."""
    return Options(select=settings.codes_for(path), profile_factory=profiles.get(settings.target))


def options_with_profile(settings: Settings, path: str, profile: HardwareProfile | None) -> Options:
    """As ``options_for``, with a fixed profile when one is given."""
    if profile is None:
        return options_for(settings, path, ProfileCache())
    return Options(settings.codes_for(path), lambda: profile)


def lint_bytes(data: bytes, path: str, options: Options) -> FileResult:
    """Check a file's bytes: pre-filter, decode (LL901 when that fails), analyse."""
    result = FileResult(path)
    if not passes_prefilter(data) and not undecodable(data):
        return result
    try:
        source = decode(data)
    except DecodeError as exc:
        if "LL901" in options.select:
            result.findings.append(engine_finding("LL901", f"cannot read file: {exc}", path, exc.row, exc.column))
        return result
    result.source = source
    try:
        summaries: list[Summary] = []
        result.findings = decided_findings(source.text, path, options, summaries=summaries)
        result.summary = summaries[0] if summaries else None
    except Exception as exc:  # the engine never crashes on one file
        result.error = f"internal error while checking: {type(exc).__name__}: {exc}"
    return result


def check_path(path: Path, options: Options, fix: FixRequest | None = None) -> FileResult:
    """Check (or fix) the file at ``path``."""
    try:
        data = read_source(path)
    except OSError as exc:
        return unreadable(str(path), exc, options)
    return check_bytes(data, path, options, fix)


def unreadable(path: str, exc: OSError, options: Options) -> FileResult:
    """The result for a file that cannot be read: LL901 when selected."""
    result = FileResult(path)
    if "LL901" in options.select:
        reason = exc.strerror or type(exc).__name__
        message = f"cannot read file: {reason}"
        result.findings.append(Finding("LL901", "unreadable-file", message, path, Location(1, 1), Location(1, 2)))
    return result


def check_bytes(
    data: bytes, path: Path | str, options: Options, fix: FixRequest | None = None, *, external: SpecSource | None = None
) -> FileResult:
    """Check (or fix) a file read as ``data``: a notebook by its ``.ipynb``
    name, Python source otherwise.  ``external`` replaces the rules' fixes
    (``--from-verify``)."""
    if str(path).endswith(".ipynb"):
        return notebook.check(path, data, options, fix)
    if fix is None:
        return lint_bytes(data, str(path), options)
    return fix_bytes(Path(path), data, options, fix, external)


def fix_bytes(
    path: Path, data: bytes, options: Options, request: FixRequest, external: SpecSource | None = None
) -> FileResult:
    """Fix one file read as ``data``; write it back unless ``request.dry_run``.

    Any failure leaves the file as it was and is reported on the result
    (``error``), with the findings of the unfixed text.
    """
    result = FileResult(str(path))
    if external is None and not passes_prefilter(data) and not undecodable(data):
        return result
    try:
        source = decode(data)
    except DecodeError:
        return lint_bytes(data, str(path), options)
    result.source = source
    try:
        skip = request.skip.get(os.path.abspath(path), frozenset())
        summaries: list[Summary] = []
        fixed, findings, applied = fix_text(
            source.text, str(path), options, unsafe=request.unsafe, external=external, skip=skip, summaries=summaries
        )
        new_bytes = source.encode(fixed)
    except (FixFailed, UnicodeEncodeError) as exc:
        result.error = str(exc) if isinstance(exc, FixFailed) else f"fixed code cannot be written as {source.encoding}"
        return _unfixed(result, options)
    except Exception as exc:  # never crash the run over one file
        result.error = f"internal error while fixing: {type(exc).__name__}: {exc}"
        return _unfixed(result, options)
    result.findings = findings
    result.applied = applied
    # The text as it is left: the project phase takes it instead of parsing the file again.
    result.summary = summaries[0] if summaries else None
    if fixed == source.text:
        return result
    result.fixed = fixed
    if request.dry_run:
        return result
    result.error = write_fixes(path, data, new_bytes)
    if result.error is None:
        return result
    # Nothing was written: report the file as it is.
    result.fixed, result.summary = None, None
    return _unfixed(result, options)



def _unfixed(result: FileResult, options: Options) -> FileResult:
    result.applied = {}
    assert result.source is not None
    try:
        result.findings, _ = analyse(result.source.text, result.path, options)
    except Exception:  # the error already on the result says what failed
        result.findings = []
    return result


def fix_stdin(data: bytes, name: str, options: Options, request: FixRequest) -> tuple[FileResult, bytes | None]:
    """Fix source read from stdin: (the result, the bytes to print back).
    Nothing is written; whatever fails, the input comes back unchanged.
    The bytes are None when the input is not text (nothing to fix)."""
    if not name.endswith(".ipynb"):
        try:
            decode(data)
        except DecodeError:
            return lint_bytes(data, name, options), None
    result = check_bytes(data, name, options, FixRequest(request.unsafe, dry_run=True))
    if result.fixed is None:
        return result, data
    if result.source is not None:
        return result, result.source.encode(result.fixed)
    return result, notebook.encode(data, result.fixed)


def check_text(text: str, path: str, options: Options) -> list[Finding]:
    """Findings for source text that never was a file's bytes (an editor's buffer)."""
    return decided_findings(text, path, options)


def fix_source_text(text: str, path: str, options: Options, *, unsafe: bool) -> tuple[str, list[Finding], dict[str, int]]:
    """(fixed text, remaining findings, applied counts) for source text;
    raises FixFailed when the fixes cannot be applied safely."""
    return fix_text(text, path, options, unsafe=unsafe)
