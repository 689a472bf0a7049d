"""The command line: the commands and their options; ``check`` and ``fix``
run in ``frontends.checking``, the exit codes and ``fail`` are in
``frontends.arguments``.  Errors are one line on stderr, never a traceback
(set LOADLINT_DEBUG=1 for one).
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any, Callable, NoReturn, TypeVar

import click

from loadlint import __version__
from loadlint.sources.source import visible, visible_json, visible_lines
from loadlint.frontends.arguments import EXIT_CLEAN, EXIT_ERROR, fail, parse_targets
from loadlint.frontends.checking import CheckOptions, run_check


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
        target = parse_targets(targets) or ConfigResolver(Overrides(), None, False).for_path(Path(".")).target
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
        target = parse_targets(targets) or detected_target()
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
