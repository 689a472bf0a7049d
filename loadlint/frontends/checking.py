"""``loadlint check`` and ``loadlint fix``: their options as parsed, the run
over paths (or standard input) through the API, the report and the exit code."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import click

from loadlint.frontends.arguments import (
    EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, fail, parse_targets, per_file_ignores, selectors, split_values, target_error,
)
from loadlint.sources.source import visible, visible_lines
from loadlint.types import HUMAN_FORMATS, FixRequest, Run

if TYPE_CHECKING:
    from loadlint.workspace.config import ConfigResolver, Settings


@dataclass(frozen=True)
class CheckOptions:
    """``loadlint check`` / ``loadlint fix`` as the command line parsed them.

    The command line's own: most fields are about the report (format,
    colour, statistics, diff), which the API never reads; the API takes the
    few that shape a run (``jobs``, the cache, ``force_exclude``) by name."""

    paths: tuple[str, ...] = ()
    fix: bool | None = None
    unsafe_fixes: bool | None = None
    diff: bool = False
    show_fixes: bool = False
    exit_zero: bool = False
    exit_non_zero_on_fix: bool = False
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    per_file_ignores: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    extend_exclude: tuple[str, ...] = ()
    force_exclude: bool = False
    respect_gitignore: bool | None = None
    targets: tuple[str, ...] = ()
    output_format: str | None = None
    output_file: str | None = None
    statistics: bool = False
    no_cache: bool = False
    cache_dir: str | None = None
    config_path: str | None = None
    isolated: bool = False
    stdin_filename: str | None = None
    show_settings: bool = False
    color: str = "auto"
    quiet: bool = False
    jobs: int | None = None
    from_verify: str | None = None
    add_noqa: bool = False

    @property
    def fixing(self) -> bool:
        """Fixes are computed (written, or shown with --diff)."""
        return bool(self.fix or self.diff)


def run_paths(paths: list[Path], resolver: ConfigResolver, options: CheckOptions, request: FixRequest | None, fmt: str) -> Run:
    """The run over ``paths``: cache and pool as ``options`` ask, progress
    on a terminal's stderr for the human formats."""
    from loadlint.api import check_paths

    progress = fmt in HUMAN_FORMATS and not options.quiet and _is_tty(sys.stderr)
    return check_paths(paths, resolver=resolver, force_exclude=options.force_exclude, fix=request, jobs=options.jobs,
                       cache=not options.no_cache, cache_dir=options.cache_dir, progress=progress)


def _is_tty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def run_check(options: CheckOptions) -> int:
    """Run ``check``/``fix`` as ``options`` say; the exit code."""
    from loadlint.workspace.config import ConfigError, Overrides, ConfigResolver, describe

    try:
        overrides = Overrides(
            select=selectors(options.select, "--select"),
            ignore=selectors(options.ignore, "--ignore"),
            extend_select=selectors(options.extend_select, "--extend-select"),
            exclude=split_values(options.exclude),
            extend_exclude=split_values(options.extend_exclude),
            respect_gitignore=options.respect_gitignore,
            unsafe_fixes=options.unsafe_fixes,
            output_format=options.output_format,
            target=parse_targets(options.targets),
            per_file_ignores=per_file_ignores(options.per_file_ignores),
        )
        resolver = ConfigResolver(overrides, Path(options.config_path) if options.config_path else None, options.isolated)
        # As in ruff, --stdin-filename alone means "read stdin".
        paths = list(options.paths) or (["-"] if options.stdin_filename else ["."])
        if options.stdin_filename and paths != ["-"]:
            # ruff reads stdin then too, and says which paths it leaves.
            for path in dict.fromkeys(p for p in paths if p != "-"):
                click.echo(f"loadlint: warning: ignoring {path} in favour of standard input (--stdin-filename)", err=True)
            paths = ["-"]
        if options.show_settings:
            first = Path(options.stdin_filename if paths == ["-"] and options.stdin_filename else paths[0])
            click.echo(visible_lines(describe(first, resolver.for_path(first))))
            return EXIT_CLEAN
        if options.from_verify:
            return _fix_from_verify(resolver, options, options.from_verify)
        if paths == ["-"]:
            return _check_stdin(resolver, options)
        for path in paths:
            if not os.path.lexists(path):
                fail(f"{path}: no such file or folder")
        return _check_paths([Path(p) for p in paths], resolver, options)
    except (ConfigError, target_error()) as exc:
        fail(str(exc))
    except (click.exceptions.Exit, click.ClickException):
        raise
    except KeyboardInterrupt:
        click.echo("loadlint: interrupted", err=True)
        return 130
    except Exception as exc:  # one line, not a traceback
        if os.environ.get("LOADLINT_DEBUG"):
            raise
        fail(f"internal error: {type(exc).__name__}: {exc}")
    return EXIT_ERROR


def _check_paths(paths: list[Path], resolver: ConfigResolver, options: CheckOptions) -> int:
    first = resolver.for_path(paths[0])
    if options.add_noqa:
        if options.fixing:
            fail("--add-noqa cannot be combined with --fix or --diff")
        return _add_noqa(run_paths(paths, resolver, options, None, "full"))
    unsafe = options.unsafe_fixes if options.unsafe_fixes is not None else first.unsafe_fixes
    request = FixRequest(unsafe=unsafe, dry_run=options.diff) if options.fixing else None
    fmt = options.output_format or first.output_format or "full"
    _statistics_format(options, fmt)
    run = run_paths(paths, resolver, options, request, fmt)
    if run.files == 0:
        # ruff's warning; "All checks passed!" would claim a check that never ran
        # (a machine format still gets its empty report).
        click.echo("loadlint: warning: No Python files found under the given path(s)", err=True)
        if fmt in HUMAN_FORMATS and not options.statistics:
            return EXIT_CLEAN
    return _finish(run, first, options, unsafe=unsafe)


#: The formats ``--statistics`` is printed in: its table, or JSON objects.
STATISTICS_FORMATS = ("full", "concise", "json", "json-lines")


def _statistics_format(options: CheckOptions, fmt: str) -> None:
    """A usage error for ``--statistics`` in a format that has no place for
    counts (SARIF, annotations, a Code Quality report...): printing the text
    table there would break the file a CI step reads."""
    if options.statistics and fmt not in STATISTICS_FORMATS:
        fail(f"--statistics cannot be written as {fmt}: use --output-format {', '.join(STATISTICS_FORMATS[:-1])} or {STATISTICS_FORMATS[-1]}")


def _add_noqa(run: Run) -> int:
    """Suppress every finding where it is reported; notebooks and files that
    do not parse are left as they are."""
    from loadlint.sources.files import read_source, write_fixes
    from loadlint.api import add_noqa
    from loadlint.rules import codes_where

    engine = codes_where(engine=True)
    total = 0
    for result in run.results:
        rows: dict[int, set[str]] = {}
        for finding in result.findings:
            if finding.cell is None and finding.code not in engine:
                rows.setdefault(finding.location.row, set()).add(finding.code)
        if not rows or result.path.endswith(".ipynb"):
            continue
        original = read_source(Path(result.path))
        try:
            text = original.decode("utf-8")
        except UnicodeDecodeError:
            continue
        new, added, refused = add_noqa(text, rows)
        for row in refused:
            # Counted as added, these would still be reported by the next check.
            codes = ", ".join(sorted(rows[row]))
            click.echo(f"loadlint: warning: {visible(result.path)}:{row}: no `# noqa` there would suppress {codes}", err=True)
        if added:
            error = write_fixes(Path(result.path), original, new.encode("utf-8"))
            if error is not None:
                click.echo(f"{visible(result.path)}: error: {visible(error)}", err=True)
                continue
            total += added
    click.echo(f"Added {total} noqa directive{'s' if total != 1 else ''}.")
    return EXIT_CLEAN


def _check_stdin(resolver: ConfigResolver, options: CheckOptions) -> int:
    from loadlint.workspace.discover import is_force_excluded
    from loadlint.api import ProfileCache, check_bytes, fix_stdin, options_for

    name = options.stdin_filename or "-"
    settings = resolver.for_path(Path(name))
    _statistics_format(options, options.output_format or settings.output_format or "full")
    if options.force_exclude and options.stdin_filename and is_force_excluded(Path(name), settings):
        # An excluded file is passed through untouched, with no findings.
        if options.fix and not options.diff:
            _write_bytes(sys.stdin.buffer.read())
        return EXIT_CLEAN
    data = sys.stdin.buffer.read()
    file_options = options_for(settings, name, ProfileCache())
    unsafe = options.unsafe_fixes if options.unsafe_fixes is not None else settings.unsafe_fixes
    if not options.fixing:
        return _report(Run.of([check_bytes(data, name, file_options)]), settings, options, unsafe=unsafe)
    result, out = fix_stdin(data, name, file_options, FixRequest(unsafe=unsafe))
    run = Run.of([result])
    if out is None:  # not text: echoed back as it came, the report on stderr
        if not options.diff:
            _write_bytes(data)
        return _report(run, settings, options, unsafe=unsafe, stream=sys.stderr)
    if options.diff:
        return _print_diff(run, tally=False)
    # Whatever happens, an editor piping through us gets its code back.
    _write_bytes(out)
    return _report(run, settings, options, unsafe=unsafe, stream=sys.stderr)


def _write_bytes(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


def _fix_from_verify(resolver: ConfigResolver, options: CheckOptions, report: str) -> int:
    from loadlint.api import ReportError, fix_from_verify

    try:
        run, skipped, first = fix_from_verify(report, options.paths, resolver, dry_run=options.diff)
    except ReportError as exc:
        fail(str(exc))
    for note in skipped:
        click.echo(f"loadlint: {visible(note)}", err=True)
    if skipped and first is None:
        # Nothing confirmed: not a clean run (a contended or refuted report).
        click.echo(f"loadlint: {visible(report)} has no confirmed configuration: nothing was written", err=True)
        return EXIT_FINDINGS
    return _finish(run, first or resolver.for_path(Path(".")), options, unsafe=False)


def _finish(run: Run, settings: Settings, options: CheckOptions, *, unsafe: bool) -> int:
    return _print_diff(run) if options.diff else _report(run, settings, options, unsafe=unsafe)


def _print_diff(run: Run, *, tally: bool = True) -> int:
    """``--diff``: the fixes as one unified diff on stdout; failures (and
    with ``tally``, how many fixes) on stderr.  Exit 1 when there is a diff
    or a file could not be fixed."""
    from loadlint.output.report import diff, unlocked, writable

    text, fixed = diff(run)
    click.echo(writable(text, sys.stdout), nl=False)
    for result in run.errors:
        click.echo(f"{visible(result.path)}: error: {visible(result.error or '')}", err=True)
    if fixed and tally:
        later = unlocked(fixed, sum(getattr(r.applied, "later", 0) for r in run.results))
        click.echo(f"Would fix {fixed} problem{'s' if fixed != 1 else ''}" + (f"; {later}." if later else "."), err=True)
    return EXIT_FINDINGS if text or run.errors else EXIT_CLEAN


def _report(run: Run, settings: Settings, options: CheckOptions, *, unsafe: bool, stream: TextIO | None = None) -> int:
    from loadlint.output.report import Style, encoded, render, summarize, use_color, writable

    fmt = options.output_format or settings.output_format or "full"
    summary = summarize(run, unsafe, options.fixing)
    summary.enabled = settings.codes()
    stream = stream or sys.stdout
    style = Style(use_color(options.color, stream) and fmt in HUMAN_FORMATS and not options.output_file)
    text = render(
        run, summary, fmt, style, quiet=options.quiet, show_fixes=options.show_fixes, as_statistics=options.statistics
    )
    if options.output_file:
        try:
            Path(options.output_file).parent.mkdir(parents=True, exist_ok=True)
            Path(options.output_file).write_bytes(encoded(text))
        except OSError as exc:
            fail(f"cannot write {options.output_file}: {exc.strerror or exc}")
    else:
        # click strips escape codes from non-TTY streams unless told otherwise,
        # which would make --color always / FORCE_COLOR useless in CI logs.
        click.echo(writable(text, stream), nl=False, file=stream, color=style.color)
    return exit_code(run, options, summary.fixed)


def exit_code(run: Run, options: CheckOptions, fixed: int) -> int:
    """ruff's exit code for a run: 1 when findings remain, a file failed,
    or (with --exit-non-zero-on-fix) anything was fixed."""
    if run.errors:
        return EXIT_FINDINGS if not options.exit_zero else EXIT_CLEAN
    if options.exit_non_zero_on_fix and fixed:
        return EXIT_FINDINGS
    if run.findings and not options.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN
