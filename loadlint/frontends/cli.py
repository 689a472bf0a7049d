"""The command line: parse options, call the API, print, choose the exit code.

Exit codes (ruff's): 0 clean or everything fixed, 1 findings remain (or
``--diff`` has a diff), 2 usage, configuration or internal error.  Errors
are one line on stderr, never a traceback (set LOADLINT_DEBUG=1 for one).
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NoReturn, TextIO, TypeVar

import click

from loadlint import __version__
from loadlint.sources.source import visible, visible_json, visible_lines
from loadlint.frontends.checking import CheckOptions, run_paths
from loadlint.types import HUMAN_FORMATS, FixRequest, Run, Target

if TYPE_CHECKING:
    from loadlint.workspace.config import ConfigResolver, Settings

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class LazyGroup(click.Group):
    """Subcommands in their own modules (verify, lsp) load only when used,
    so start-up never imports torch or pygls."""

    lazy = {
        "verify": "loadlint.verify.command:verify",
        "lsp": "loadlint.frontends.lsp:command",
        "trace": "loadlint.trace.command:trace",
        "monitor": "loadlint.monitor.command:monitor",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy:
            module, attr = self.lazy[name].split(":")
            try:
                command: click.Command = getattr(importlib.import_module(module), attr)
                return command
            except ImportError as exc:
                hint = "lsp" if name == "lsp" else "verify"
                message = f"'loadlint {name}' needs the '{hint}' extra: pip install 'loadlint[{hint}]' ({exc})"

                @click.command(name, context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
                def unavailable() -> None:
                    fail(message)

                return unavailable
        return super().get_command(ctx, name)


def _target_error() -> type[Exception]:
    # Evaluated only while an exception is being handled: a clean run never
    # pays for importing loadlint.hardware.detect.
    from loadlint.hardware.detect import TargetError

    return TargetError


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print one error line and exit."""
    # One line: a path in the message cannot break it or reach the terminal raw.
    click.echo(f"loadlint: error: {visible(message)}", err=True)
    sys.exit(code)


def _split(values: tuple[str, ...]) -> tuple[str, ...] | None:
    if not values:
        return None
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def _parse_targets(values: tuple[str, ...]) -> Target:
    """The ``--target`` options, a later one's keys over an earlier one's."""
    target = Target()
    if not values:
        return target
    from loadlint.hardware.detect import parse_target

    for value in values:
        target = parse_target(value).over(target)
    return target


def _per_file_ignores(values: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...] | None:
    if not values:
        return None
    from loadlint.workspace.config import expand

    entries: list[tuple[str, tuple[str, ...]]] = []
    for value in values:
        pattern, sep, codes = value.rpartition(":")
        if not sep or not pattern:
            raise click.BadParameter(f"expected GLOB:CODES, got {value!r}", param_hint="--per-file-ignores")
        listed = tuple(c.strip() for c in codes.split(",") if c.strip())
        # Refused here as the same codes are in pyproject.toml.
        expand(listed, f"--per-file-ignores {pattern}")
        entries.append((pattern, listed))
    return tuple(entries)


def _selectors(values: tuple[str, ...], flag: str) -> tuple[str, ...] | None:
    """A selection option's codes, each checked under the flag it came with."""
    codes = _split(values)
    if codes:
        from loadlint.workspace.config import expand

        expand(codes, flag)
    return codes


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="loadlint", message="%(prog)s %(version)s")
def cli() -> None:
    """loadlint: a static advisor for PyTorch DataLoader configuration."""


_Command = TypeVar("_Command", bound=Callable[..., None])


def check_options(func: _Command) -> _Command:
    """The options ``check`` and ``fix`` share (the fields of CheckOptions)."""
    options = [
        click.argument("paths", nargs=-1, type=click.Path(path_type=str)),
        click.option("--fix/--no-fix", "fix", default=None, help="Apply safe fixes."),
        click.option("--unsafe-fixes/--no-unsafe-fixes", "unsafe_fixes", default=None, help="Also apply (and mark as fixable) unsafe fixes."),
        click.option("--diff", is_flag=True, help="Print a unified diff of the fixes; write nothing; exit 1 when there is one."),
        click.option("--show-fixes", is_flag=True, help="List the fixes that were applied."),
        click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain."),
        click.option("--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when any file was fixed, even if nothing remains."),
        click.option("--select", multiple=True, help="Codes or prefixes to enable (comma list; LL2, ALL)."),
        click.option("--ignore", multiple=True, help="Codes or prefixes to disable."),
        click.option("--extend-select", multiple=True, help="Codes or prefixes to enable on top of the selection."),
        click.option("--per-file-ignores", multiple=True, help="GLOB:CODES to ignore in matching files."),
        click.option("--exclude", multiple=True, help="Replace the exclude patterns."),
        click.option("--extend-exclude", multiple=True, help="Patterns to exclude on top of the defaults."),
        click.option("--force-exclude", is_flag=True, help="Apply excludes (and .gitignore) to explicitly named files too."),
        click.option("--respect-gitignore/--no-respect-gitignore", default=None, help="Skip files .gitignore ignores (default on)."),
        click.option("--target", "targets", multiple=True, metavar="SPEC", help="Target hardware: cpus=64,gpus=8,memory=512,shm=64,platform=linux,python=3.12,torch=2, or detect (this machine)."),
        click.option("--output-format", type=click.Choice(["full", "concise", "json", "json-lines", "sarif", "github", "gitlab", "junit", "pylint"]), envvar="LOADLINT_OUTPUT_FORMAT", default=None, help="Report format (default full; also LOADLINT_OUTPUT_FORMAT)."),
        click.option("-o", "--output-file", type=click.Path(dir_okay=False, path_type=str), help="Write the report to FILE."),
        click.option("--statistics", is_flag=True, help="Count findings per rule: a table, or JSON with --output-format json or json-lines."),
        click.option("--no-cache", is_flag=True, help="Do not read or write the cache."),
        click.option("--cache-dir", type=click.Path(file_okay=False, path_type=str), envvar="LOADLINT_CACHE_DIR", help="Cache folder (default .loadlint_cache at the project root)."),
        click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=str), help="Use this configuration file only."),
        click.option("--isolated", is_flag=True, help="Ignore all configuration files."),
        click.option("--stdin-filename", type=str, help="Read stdin as this file (- or no path; paths beside it are ignored, with a warning)."),
        click.option("--show-settings", is_flag=True, help="Print the resolved settings for the first path and exit."),
        click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", help="Colour output."),
        click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary."),
        click.option("--add-noqa", is_flag=True, help="Add `# noqa: CODE` to every line with a finding (to adopt loadlint on existing code)."),
        click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Processes checking files: this one and N-1 workers (default: the usable CPUs)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@cli.command("check")
@check_options
def check_command(**kwargs: Any) -> None:
    """Check files and folders (default: the current folder)."""
    sys.exit(run_check(CheckOptions(**kwargs)))


@cli.command("fix")
@check_options
@click.option(
    "--from-verify",
    "from_verify",
    type=click.Path(dir_okay=False, path_type=str),
    help="Write the configurations a `loadlint verify -o REPORT.json` run confirmed into their calls.",
)
def fix_command(**kwargs: Any) -> None:
    """Apply safe fixes (same as check --fix)."""
    if kwargs["fix"] is None:
        kwargs["fix"] = True
    sys.exit(run_check(CheckOptions(**kwargs)))


def run_check(options: CheckOptions) -> int:
    """Run ``check``/``fix`` as ``options`` say; the exit code."""
    from loadlint.workspace.config import ConfigError, Overrides, ConfigResolver, describe

    try:
        overrides = Overrides(
            select=_selectors(options.select, "--select"),
            ignore=_selectors(options.ignore, "--ignore"),
            extend_select=_selectors(options.extend_select, "--extend-select"),
            exclude=_split(options.exclude),
            extend_exclude=_split(options.extend_exclude),
            respect_gitignore=options.respect_gitignore,
            unsafe_fixes=options.unsafe_fixes,
            output_format=options.output_format,
            target=_parse_targets(options.targets),
            per_file_ignores=_per_file_ignores(options.per_file_ignores),
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
    except (ConfigError, _target_error()) as exc:
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


@cli.command("hardware")
@click.option("--json", "as_json", is_flag=True, help="Print the profile as JSON.")
@click.option("--target", "targets", multiple=True, metavar="SPEC", help="Show this target's figures instead of this machine's.")
def hardware_command(as_json: bool, targets: tuple[str, ...]) -> None:
    """Print the declared target the rules judge against, else this machine's profile."""
    import json

    from loadlint.hardware.detect import TargetError, resolve_profile
    from loadlint.hardware.present import format_profile, profile_to_dict
    from loadlint.hardware.target import format_target, target_profile, target_to_dict
    from loadlint.workspace.config import ConfigError, Overrides, ConfigResolver

    try:
        # --target, else the project's [tool.loadlint.target] (what the rules use).
        target = _parse_targets(targets) or ConfigResolver(Overrides(), None, False).for_path(Path(".")).target
        # A declared machine is shown alone: this one's memory says nothing about it.
        profile = target_profile(target) if target else resolve_profile(None)
    except (TargetError, ConfigError) as exc:
        fail(str(exc))
    # A declared target comes from the repository's configuration.
    if as_json:
        click.echo(visible_json(json.dumps(target_to_dict(profile) if target else profile_to_dict(profile), indent=2)))
    else:
        click.echo(visible_lines(format_target(profile) if target else format_profile(profile)))


@cli.command("init")
@click.option("--target", "targets", multiple=True, metavar="SPEC", help="Declare this machine instead of the detected one.")
@click.option("--force", is_flag=True, help="Replace a [tool.loadlint.target] table that is there.")
def init_command(targets: tuple[str, ...], force: bool) -> None:
    """Declare the training machine in pyproject.toml ([tool.loadlint.target])."""
    from loadlint.hardware.detect import TargetError
    from loadlint.hardware.target import TargetExists, detected_target, write_target

    try:
        target = _parse_targets(targets) or detected_target()
        table = write_target(Path("pyproject.toml"), target, force=force)
    except (TargetError, TargetExists) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write pyproject.toml: {exc.strerror or exc}")
    except UnicodeDecodeError:
        fail("cannot write pyproject.toml: it is not UTF-8")
    origin = "--target" if targets else "this machine"
    click.echo(f"Wrote the training machine ({origin}) to pyproject.toml:\n{visible_lines(table)}", nl=False)
    if not targets and not target.gpus:
        from loadlint.api import uses_cuda

        if uses_cuda(Path(".")):
            click.echo(
                "loadlint: warning: this machine has no GPU but the code uses CUDA: it is not the training machine; "
                "declare that one with `loadlint init --force --target cpus=N,gpus=N`", err=True,
            )


@cli.command("rule")
@click.argument("code", required=False, metavar="[CODE|NAME]")
@click.option("--all", "all_rules", is_flag=True, help="Print every rule.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", help="The page as text or JSON.")
def rule_command(code: str | None, all_rules: bool, output_format: str) -> None:
    """Explain a rule (its documentation page)."""
    import json

    from loadlint.rules import CODES, rule_class

    if all_rules == bool(code):
        fail("give a rule code or name (loadlint rule LL201, loadlint rule synchronous-loading) or --all")
    from loadlint.rules.runtime import RUNTIME_CODES

    by_name = {entry.name: c for c, entry in CODES.items()}
    by_name.update({r.name: c for c, r in RUNTIME_CODES.items()})
    codes = sorted(CODES) if all_rules or code is None else [by_name.get(code.lower(), code.upper())]
    if codes[0] in RUNTIME_CODES and not all_rules and output_format == "text":  # reported by `loadlint trace` only
        click.echo(visible_lines(RUNTIME_CODES[codes[0]].documentation()), nl=False)
        return
    for c in codes:
        if c not in CODES:
            fail(f"unknown rule '{code}' (give a code like LL201 or a name like synchronous-loading)")
    rules = [rule_class(c) for c in codes]
    if output_format == "json":
        payload = [
            {
                "code": r.code,
                "name": r.name,
                "summary": r.summary,
                "fix": r.fix_availability,
                "explanation": r.documentation(),
                "url": r.url(),
            }
            for r in rules
        ]
        click.echo(visible_json(json.dumps(payload if all_rules else payload[0], indent=2)))
    else:
        click.echo(visible_lines("\n".join(r.documentation() for r in rules)), nl=False)


@cli.command("clean")
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=str), envvar="LOADLINT_CACHE_DIR", help="The cache folder to remove.")
def clean_command(paths: tuple[str, ...], cache_dir: str | None) -> None:
    """Remove the cache folder."""
    from loadlint.workspace.cache import DEFAULT_DIR, clean, default_dir, is_cache_dir

    # The project's cache (at its root), and one a path holds itself (left by older versions).
    folders = [Path(cache_dir)] if cache_dir else [default_dir(Path(p)) for p in (paths or (".",))]
    folders += [] if cache_dir else [Path(p) / DEFAULT_DIR for p in paths]
    for folder in dict.fromkeys(f.absolute() for f in folders):
        if not folder.is_dir():
            continue
        # --cache-dir can name any folder; only one loadlint tagged is deleted.
        if not is_cache_dir(folder):
            click.echo(f"loadlint: warning: not removing {visible(str(folder))}: it is not a loadlint cache (no CACHEDIR.TAG)", err=True)
            continue
        shown = os.path.relpath(folder)
        click.echo(f"Removing cache at: {visible(str(folder) if shown.startswith('..') else shown)}")
        clean(folder)


def one_line(exc: click.ClickException) -> str:
    """Click's error as one line in our style, without its usage block:
    the message, then where help is (``loadlint check --help``)."""
    message = visible(" ".join(exc.format_message().split()))
    message = message[:1].lower() + message[1:].rstrip(".")
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        message += f" (see '{ctx.command_path} --help')"
    return message


def console() -> NoReturn:
    """The console script (and ``python -m loadlint``): ``main``'s exit code.

    The interpreter is left without tearing it down: freeing a run's objects
    one by one (modules, summaries, kept sources) took a cold check of
    Lightning 0.035 s, which nothing needs.  The exit handlers still run and
    the output is flushed; where another thread or a child process is still
    alive (a language server's), or flushing fails (a closed pipe, which
    Python reports as before), the interpreter exits as usual."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # AttributeError: no stream at all (pythonw)
        raise SystemExit(code) from None
    import threading

    processes = sys.modules.get("multiprocessing")
    if threading.active_count() > 1 or processes is not None and processes.active_children():
        raise SystemExit(code)
    import atexit

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    """The console script: run the command line, return its exit code."""
    try:
        cli.main(args=argv, prog_name="loadlint", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("loadlint: interrupted", err=True)
        return 130
    except click.ClickException as exc:
        click.echo(f"loadlint: error: {one_line(exc)}", err=True)
        return EXIT_ERROR
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_ERROR)
    except KeyboardInterrupt:
        click.echo("loadlint: interrupted", err=True)
        return 130
    return EXIT_CLEAN
