"""The facade: the one way the entry points (the command line, the language
server, the flake8 plugin, ``trace``, ``verify`` and ``monitor``) reach the
analysis.  They import nothing from ``run``, ``engine``, ``project``,
``rules`` or ``facts`` but through here (the rule registry and the
DataLoader signature, plain data, excepted); pyproject.toml's import
contract holds them to it.

A path or a file's bytes goes through :mod:`loadlint.engine.pipeline`, many
files through :mod:`loadlint.run.runner`, an editor's text through
:mod:`loadlint.engine.analysis` and :mod:`loadlint.engine.notebook`.  A file
that cannot be read or parsed is a finding (LL900, LL901) or an error on its
result, never an exception; ``fix_source`` and ``fix_from_verify`` raise
only what their docstrings name.  libcst's node classes are changed only while a
call parses (:mod:`loadlint.cst.slicing`) and only for the calling thread's
nodes: they are libcst's own again once it returns.  ``LOADLINT_PLAIN_LIBCST=1``
leaves them alone altogether (:mod:`loadlint.cst.gate`).
"""

from __future__ import annotations


import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from loadlint.workspace.cache import lazy_cache
from loadlint.workspace.config import Overrides, ConfigResolver, Settings
from loadlint.workspace.discover import Candidate, discover
from loadlint.engine.analysis import Analysis, analyse
from loadlint.engine.decision import Chosen, FixFailed, SpecSource, decided_findings, fix_text
from loadlint.engine.notebook import Cell, Checked, analyse_cells
from loadlint.engine.pipeline import ProfileCache, check_bytes, check_text, fix_bytes, fix_source_text, fix_stdin
from loadlint.engine.pipeline import options_for, options_with_profile
from loadlint.engine.suppress import NOQA
from loadlint.run.progress import Progress
from loadlint.run.runner import lint_candidates
from loadlint.cst.slicing import parse_module
from loadlint.sources.files import read_source
from loadlint.sources.boundary import project_root
from loadlint.sources.prefilter import passes_prefilter
from loadlint.sources.source import DecodeError, decode, visible
from loadlint.types import FileResult, Finding, FixRequest, HardwareProfile, Options, Run, Target

if TYPE_CHECKING:
    from loadlint.engine.measured import MeasuredSite, ReportError
    from loadlint.engine.noqa import add_noqa
    from loadlint.engine.sites import LoaderSite
    from loadlint.facts.collect import ModuleFacts, prepare
    from loadlint.facts.loaders import LoaderCall
    from loadlint.facts.resolve import Scope

#: What the entry points use: the functions below, and these from the
#: engine as they are (``check_bytes``/``fix_stdin``: one file's bytes, as
#: ``check -``; ``analyse_cells``: a notebook's cells; ``add_noqa``:
#: ``--add-noqa``; ``NOQA``: the suppression comment's grammar; ``prepare``:
#: build the parser's tables before forking or serving), and the types an
#: analysis holds (``module_facts``: a module's facts, its loader calls and
#: the scopes their values are read in).
__all__ = [
    "NOQA",
    "Analysis",
    "Cell",
    "Checked",
    "FixFailed",
    "FixRequest",
    "LoaderCall",
    "LoaderSite",
    "ModuleFacts",
    "Overrides",
    "ProfileCache",
    "ReportError",
    "Run",
    "Scope",
    "Target",
    "add_noqa",
    "analyse_cells",
    "analyse_document",
    "check_bytes",
    "check_paths",
    "check_source",
    "check_text",
    "decided_findings",
    "findings_in_project",
    "fix_from_verify",
    "fix_source",
    "fix_stdin",
    "fixed_document",
    "fixed_in_project",
    "loader_sites",
    "options_for",
    "prepare",
    "project_findings",
    "stop_project_phases",
    "suggest_for_call",
    "uses_cuda",
]


def __getattr__(name: str) -> Any:
    """The names above that bring libcst with them, imported on first use:
    a run whose files never mention a DataLoader never imports it."""
    if name == "add_noqa":
        from loadlint.engine.noqa import add_noqa

        return add_noqa
    if name == "ReportError":
        from loadlint.engine.measured import ReportError

        return ReportError
    if name in ("ModuleFacts", "prepare"):
        from loadlint.facts import collect

        return getattr(collect, name)
    if name == "LoaderCall":
        from loadlint.facts.loaders import LoaderCall

        return LoaderCall
    if name == "LoaderSite":
        from loadlint.engine.sites import LoaderSite

        return LoaderSite
    if name == "Scope":
        from loadlint.facts.resolve import Scope

        return Scope
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_paths(
    paths: Iterable[Path],
    overrides: Overrides | None = None,
    *,
    config: Path | None = None,
    isolated: bool = False,
    force_exclude: bool = False,
    fix: FixRequest | None = None,
    resolver: ConfigResolver | None = None,
    profiles: ProfileCache | None = None,
    jobs: int | None = 1,
    cache: bool = False,
    cache_dir: str | None = None,
    progress: bool = False,
) -> Run:
    """Check (or fix) files and folders; one FileResult per file.

    By default in one process, with no cache: a library call must not fork
    or write behind its caller's back.  The command line asks for more:
    ``jobs`` (None: as many as pay), ``cache`` (in ``cache_dir``, or the
    default folder) and ``progress`` on stderr."""
    resolver = resolver or ConfigResolver(overrides or Overrides(), config, isolated)
    candidates = discover(list(paths), resolver.for_path, force_exclude=force_exclude)
    return lint_candidates(
        candidates, fix, jobs=jobs, cache=lazy_cache(cache_dir) if cache else None,
        progress=Progress(sys.stderr) if progress else None, profiles=profiles or ProfileCache(),
    )


def check_source(
    text: str,
    path: str = "<stdin>",
    *,
    settings: Settings | None = None,
    profile: HardwareProfile | None = None,
    select: Iterable[str] | None = None,
) -> list[Finding]:
    """Findings for source text (the language server and tests use this)."""
    options = options_with_profile(settings or Settings(), path, profile)
    if select is not None:
        options = replace(options, select=frozenset(select))
    return check_text(text, path, options)


def loader_sites(path: Path, within: str | None = None) -> list[LoaderSite]:
    """The DataLoader calls of the file at ``path`` and where it iterates
    them, from the facts ``check`` computes (no rule runs): what ``trace``
    maps a run's loader onto.  The file is read as ``check`` reads it: the
    guarded read (``within``: the folder no link may lead out of), the
    pre-filter, the parse bounds (a large module parsed in part, rows kept)
    and the nesting bound; none where ``check`` analyses nothing."""
    try:
        data = read_source(path, within)
    except OSError:
        return []
    if not passes_prefilter(data):
        return []
    try:
        text = decode(data).text
    except DecodeError:
        return []
    try:
        from loadlint.engine.sites import loader_sites as sites_of

        _, analysis = analyse(text, str(path), Options(frozenset(), ProfileCache().get(Target())))
        return [] if analysis is None else sites_of(path, analysis)
    except (RecursionError, MemoryError, ValueError):
        return []


def fix_source(
    text: str,
    path: str = "<stdin>",
    *,
    settings: Settings | None = None,
    profile: HardwareProfile | None = None,
    unsafe: bool = False,
) -> tuple[str, list[Finding]]:
    """(fixed text, remaining findings) for source text; raises FixFailed
    when the fixes cannot be applied safely."""
    options = options_with_profile(settings or Settings(), path, profile)
    fixed, findings, _ = fix_source_text(text, path, options, unsafe=unsafe)
    return fixed, findings


def suggest_for_call(
    path: str, line: int, profile: HardwareProfile, project: Path | None = None
) -> dict[str, Any] | None:
    """The keyword arguments of the DataLoader call starting on ``line`` as
    ``loadlint fix`` (safe fixes) would write it: parameter -> value, removed
    arguments absent, a value that cannot be resolved statically as
    ``loadlint.facts.resolve.UNKNOWN``.  None when no call starts on that line.
    With ``project`` (a folder holding ``path``), the fixes the project
    analysis joins across its files count too (LL204 for a loader iterated
    every epoch in another module).

    ``loadlint verify`` measures this configuration against the current one.
    """
    from loadlint.facts.resolve import UNKNOWN, evaluate

    # The machine verify measures on is the one the loader runs on: the fix
    # writes its numbers, not the run-time constant a portable fix writes.
    here = {"cpus"} | ({"memory"} if profile.memory_total else set())
    profile = replace(profile, declared=profile.declared | here)
    data = read_source(path)
    text = decode(data).text
    # The script verify measures is the user's choice, under tests/ or not: its LL2xx count.
    settings = ConfigResolver(Overrides(performance_in_tests=True)).for_path(Path(path))
    options = options_with_profile(settings, path, profile)
    _, before = analyse(text, path, options)
    if before is None:
        return None
    index = next((i for i, row in _call_rows(before) if row == line), None)
    if index is None:
        return None
    fixed = _project_fixed(project, path, profile) if project is not None else None
    if fixed is None:
        fixed, _, _ = fix_text(text, path, options, unsafe=False)
    _, after = analyse(fixed, path, options)
    if after is None:
        return None
    info: Any = after.info  # the engine keeps the collector's facts untyped
    call = info.calls[index]  # fixes never add or remove DataLoader calls
    out: dict[str, Any] = {}
    for name, arg in call.args.items():
        out[name] = evaluate(arg.value, call.scope)
    for name, (expr, scope) in call.dict_args.items():
        out[name] = UNKNOWN if expr is None else evaluate(expr, scope)
    return out


def _project_fixed(project: Path, path: str, profile: HardwareProfile) -> str | None:
    """``path``'s text as ``loadlint fix PROJECT`` would write it (a dry run),
    judged against ``profile``'s CPUs, GPUs and memory; None when the project
    run does not reach the file or leaves it as it is."""
    target = Target(cpus=profile.usable_cpus, gpus=profile.gpu_count, memory=profile.memory_total or None)
    run = check_paths([project], Overrides(performance_in_tests=True, target=target),
                      fix=FixRequest(unsafe=False, dry_run=True))
    here = os.path.abspath(path)
    return next((r.fixed for r in run.results if os.path.abspath(r.path) == here and r.fixed is not None), None)


def project_findings(project: Path) -> dict[str, list[int]]:
    """The rows of every finding under ``project``, project analysis
    included, by absolute file path: where ``loadlint verify`` looks for
    the loader to measure (test files' performance findings count: a
    script named to verify is the user's choice)."""
    run = check_paths([project], Overrides(performance_in_tests=True))
    rows: dict[str, set[int]] = {}
    for result in run.results:
        for finding in result.findings:
            rows.setdefault(os.path.abspath(finding.path), set()).add(finding.location.row)
    return {path: sorted(found) for path, found in rows.items()}


def _call_rows(analysis: Analysis) -> list[tuple[int, int]]:
    from loadlint.engine.positions import Positions

    positions = analysis.positions
    assert isinstance(positions, Positions)
    info: Any = analysis.info
    return [(i, positions.range(call.node)[0].row) for i, call in enumerate(info.calls)]


def fix_from_verify(
    report: str, paths: Iterable[str], resolver: ConfigResolver, *, dry_run: bool
) -> tuple[Run, list[str], Settings | None]:
    """``loadlint fix --from-verify REPORT``: write each confirmed call site's
    measured configuration into its call, under the same checks as any fix.

    Returns the run, notes on the sites skipped, and the settings of the
    first file (None when there was none).  Raises ``ReportError`` for a
    report that cannot be used.
    """
    from loadlint.engine.measured import load_verify_report

    sites, skipped = load_verify_report(report)
    # A report names files, and a report can come from anywhere: only those
    # in the paths given, or else in the current project, are written.
    roots = [Path(p).resolve() for p in paths] or [project_root(Path.cwd()).resolve()]
    by_file: dict[str, list[MeasuredSite]] = {}
    for site in sites:
        target = Path(site.path).resolve()
        if not any(target == r or r in target.parents for r in roots):
            where = "the paths given" if paths else f"the current project ({roots[0]})"
            skipped.append(f"{visible(site.path)}:{site.line}: not fixed: outside {visible(where)}")
            continue
        shown = os.path.relpath(site.path)
        by_file.setdefault(site.path if shown.startswith("..") else shown, []).append(site)
    profiles = ProfileCache()
    request = FixRequest(unsafe=False, dry_run=dry_run)
    results: list[FileResult] = []
    first: Settings | None = None
    for file, file_sites in sorted(by_file.items()):
        settings = resolver.for_path(Path(file))
        first = first or settings
        options = options_for(settings, file, profiles)
        try:
            data = read_source(Path(file))
        except OSError as exc:
            results.append(FileResult(file, error=f"cannot read file: {exc.strerror or exc}"))
            continue
        results.append(fix_bytes(Path(file), data, options, request, external=_measured(file_sites)))
    return Run.of(results), skipped, first


def _measured(sites: list[MeasuredSite]) -> SpecSource:
    from loadlint.engine.measured import measured_specs
    from loadlint.engine.positions import Positions

    def source(text: str, analysis: Analysis | None) -> Chosen:
        positions = analysis.positions if analysis is not None else None
        if not isinstance(positions, Positions):
            positions = Positions(parse_module(text), text)
        return measured_specs(sites, text, positions)

    return source


#: What ``uses_cuda`` parses at most (a warning's evidence, not a check):
#: files over ``_CUDA_SCAN_BYTES`` are skipped, and it stops after
#: ``_CUDA_SCAN_FILES`` files or ``_CUDA_SCAN_TOTAL`` bytes parsed.
_CUDA_SCAN_FILES = 64
_CUDA_SCAN_BYTES = 1024 * 1024
_CUDA_SCAN_TOTAL = 4 * 1024 * 1024


def uses_cuda(root: Path) -> bool:
    """Whether a Python module under ``root`` runs on CUDA, as ``check``'s
    facts tell it (``.cuda()``, ``torch.device("cuda")``, ``.to("cuda")``):
    what ``init`` warns about when this machine has no GPU.  Files are read
    as ``check`` reads them; only those mentioning ``cuda`` are parsed."""
    from loadlint.facts.collect import collect
    from loadlint.workspace.config import ConfigError

    parsed = parsed_bytes = 0
    try:
        for candidate in discover([root], ConfigResolver(Overrides()).for_path):
            if parsed >= _CUDA_SCAN_FILES or parsed_bytes >= _CUDA_SCAN_TOTAL:
                break
            if candidate.path.suffix != ".py":
                continue
            try:
                data = read_source(candidate.path, within=candidate.within, limit=_CUDA_SCAN_BYTES)
            except OSError:
                continue
            if b"cuda" not in data:
                continue
            parsed += 1
            parsed_bytes += len(data)
            try:
                if collect(parse_module(decode(data).text)).accelerator.cuda:
                    return True
            except Exception:  # a file that does not parse is no evidence either way
                continue
    except ConfigError:
        return False
    return False


# -- the language server --------------------------------------------------------


def analyse_document(
    text: str, path: str, options: Options, previous: Analysis | None = None
) -> tuple[list[Finding], Analysis | None]:
    """An editor's text: its findings, their fixes not yet decided
    (``decided_findings`` decides them), and its analysis.  ``previous``, the
    analysis of the document's last text, lends the top-level statements
    the change left alone."""
    from loadlint.engine.incremental import reparsed

    return analyse(text, path, options, parsed=reparsed(previous, text))


def fixed_document(text: str, path: str, options: Options, *, unsafe: bool) -> str | None:
    """An editor's text after its own fixes; None when none applies or they
    cannot be applied safely."""
    try:
        fixed, _, applied = fix_source_text(text, path, options, unsafe=unsafe)
    except FixFailed:
        return None
    return fixed if applied else None


def findings_in_project(path: Path, settings: Settings, profiles: ProfileCache) -> list[Finding]:
    """A saved file's findings with its project's (other files' callers and
    loops), as ``check`` reports them for it."""
    from loadlint.project.join import check_in_project

    return check_in_project(path, settings, profiles, lazy_cache(None)).findings


def fixed_in_project(path: Path, settings: Settings, profiles: ProfileCache) -> str | None:
    """A saved file's text after a dry-run ``fix`` of it, its project read
    from disk (nothing written); None when it would not change."""
    request = FixRequest(unsafe=settings.unsafe_fixes, dry_run=True)
    run = lint_candidates([Candidate(path, settings, True)], request, cache=lazy_cache(None), jobs=1, profiles=profiles)
    return next((r.fixed for r in run.results if r.fixed is not None), None)


def stop_project_phases() -> None:
    """Stop every project phase of this process at its next step, for good
    (a server shutting down)."""
    from loadlint.project.budget import STOP

    STOP.set()
