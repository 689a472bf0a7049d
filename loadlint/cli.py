"""The command line: parse options, call the API, print, choose the exit code.

Exit codes (ruff's): 0 clean or everything fixed, 1 findings remain (or
``--diff`` has a diff), 2 usage, configuration or internal error.  Errors
are one line on stderr, never a traceback (set LOADLINT_DEBUG=1 for one).
"""

from __future__ import annotations

import difflib
import importlib
import os
import re
import sys
from pathlib import Path

import click

from loadlint import __version__

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class LazyGroup(click.Group):
    """Subcommands in their own modules (verify, lsp) load only when used,
    so start-up never imports torch or pygls."""

    lazy = {
        "verify": "loadlint.verify.command:verify",
        "lsp": "loadlint.lsp:command",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy:
            module, attr = self.lazy[name].split(":")
            try:
                return getattr(importlib.import_module(module), attr)
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
    # pays for importing loadlint.hardware.
    from loadlint.hardware import TargetError

    return TargetError


def fail(message: str, code: int = EXIT_ERROR) -> None:
    click.echo(f"loadlint: error: {message}", err=True)
    sys.exit(code)


def _split(values: tuple[str, ...]) -> tuple[str, ...] | None:
    if not values:
        return None
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def _parse_targets(values: tuple[str, ...]) -> dict:
    if not values:
        return {}
    from loadlint.hardware import parse_target

    target: dict = {}
    for value in values:
        target.update(parse_target(value))
    return target


def _per_file_ignores(values: tuple[str, ...]):
    if not values:
        return None
    entries = []
    for value in values:
        pattern, sep, codes = value.rpartition(":")
        if not sep or not pattern:
            raise click.BadParameter(f"expected GLOB:CODES, got {value!r}", param_hint="--per-file-ignores")
        entries.append((pattern, tuple(c.strip() for c in codes.split(",") if c.strip())))
    return tuple(entries)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="loadlint", message="%(prog)s %(version)s")
def cli() -> None:
    """loadlint: a static advisor for PyTorch DataLoader configuration."""


def check_options(func):
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
        click.option("--force-exclude", is_flag=True, help="Apply excludes to explicitly named files too."),
        click.option("--respect-gitignore/--no-respect-gitignore", default=None, help="Skip files .gitignore ignores (default on)."),
        click.option("--target", "targets", multiple=True, metavar="SPEC", help="Target hardware: cpus=64,gpus=8,memory=512,shm=64,platform=linux,python=3.12,torch=2."),
        click.option("--output-format", type=click.Choice(["full", "concise", "json", "json-lines", "sarif", "github", "gitlab", "junit", "pylint"]), envvar="LOADLINT_OUTPUT_FORMAT", default=None),
        click.option("-o", "--output-file", type=click.Path(dir_okay=False, path_type=str), help="Write the report to FILE."),
        click.option("--statistics", is_flag=True, help="Count findings per rule."),
        click.option("--no-cache", is_flag=True, help="Do not read or write the cache."),
        click.option("--cache-dir", type=click.Path(file_okay=False, path_type=str), envvar="LOADLINT_CACHE_DIR", help="Cache folder (default .loadlint_cache)."),
        click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=str), help="Use this configuration file only."),
        click.option("--isolated", is_flag=True, help="Ignore all configuration files."),
        click.option("--stdin-filename", type=str, help="The file name to use for source read from stdin (-)."),
        click.option("--show-settings", is_flag=True, help="Print the resolved settings for the first path and exit."),
        click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", help="Colour output."),
        click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary."),
        click.option("-j", "--jobs", type=int, default=None, help="Worker processes (default: the usable CPUs)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@cli.command("check")
@check_options
def check_command(**kwargs) -> None:
    """Check files and folders (default: the current folder)."""
    sys.exit(run_check(**kwargs))


@cli.command("fix")
@check_options
@click.option(
    "--from-verify",
    "from_verify",
    type=click.Path(dir_okay=False, path_type=str),
    help="Write the configurations a `loadlint verify -o REPORT.json` run confirmed into their calls.",
)
def fix_command(**kwargs) -> None:
    """Apply safe fixes (same as check --fix)."""
    if kwargs["fix"] is None:
        kwargs["fix"] = True
    sys.exit(run_check(**kwargs))


def run_check(**kw) -> int:
    from loadlint.config import ConfigError, Overrides, Resolver

    try:
        overrides = Overrides(
            select=_split(kw["select"]),
            ignore=_split(kw["ignore"]),
            extend_select=_split(kw["extend_select"]),
            exclude=_split(kw["exclude"]),
            extend_exclude=_split(kw["extend_exclude"]),
            respect_gitignore=kw["respect_gitignore"],
            unsafe_fixes=kw["unsafe_fixes"],
            output_format=kw["output_format"],
            target=_parse_targets(kw["targets"]),
            per_file_ignores=_per_file_ignores(kw["per_file_ignores"]),
        )
        resolver = Resolver(overrides, Path(kw["config_path"]) if kw["config_path"] else None, kw["isolated"])
        # As in ruff, --stdin-filename alone means "read stdin".
        paths = [p for p in kw["paths"]] or (["-"] if kw["stdin_filename"] else ["."])
        if kw["show_settings"]:
            first = Path(kw["stdin_filename"] if paths == ["-"] and kw["stdin_filename"] else paths[0])
            settings = resolver.for_path(first)
            click.echo(_format_settings(first, settings))
            return EXIT_CLEAN
        if kw.get("from_verify"):
            return _fix_from_verify(resolver, kw)
        if paths == ["-"]:
            if kw["force_exclude"] and kw["stdin_filename"] and _stdin_excluded(resolver, kw["stdin_filename"]):
                # An excluded file is passed through untouched, with no findings.
                if kw["fix"] and not kw["diff"]:
                    sys.stdout.buffer.write(sys.stdin.buffer.read())
                    sys.stdout.flush()
                return EXIT_CLEAN
            return _check_stdin(resolver, kw)
        for path in paths:
            if not os.path.lexists(path):
                fail(f"{path}: no such file or folder")
        from loadlint.runner import execute

        return execute([Path(p) for p in paths], resolver, kw)
    except (ConfigError, _target_error()) as exc:
        fail(str(exc))
    except click.exceptions.Exit:
        raise
    except click.ClickException:
        raise
    except KeyboardInterrupt:
        click.echo("loadlint: interrupted", err=True)
        return 130
    except Exception as exc:  # one line, not a traceback
        if os.environ.get("LOADLINT_DEBUG"):
            raise
        fail(f"internal error: {type(exc).__name__}: {exc}")
    return EXIT_ERROR


def _format_settings(path: Path, settings) -> str:
    from loadlint.config import describe

    return describe(path, settings)


def _stdin_excluded(resolver, name: str) -> bool:
    from loadlint.discover import is_excluded

    path = Path(name)
    return is_excluded(path, resolver.for_path(path))


def _check_stdin(resolver, kw) -> int:
    from loadlint.api import ProfileCache, Run, options_for
    from loadlint.engine import FileResult, FixFailed, fix_text, lint_bytes
    from loadlint.source import DecodeError, decode

    name = kw["stdin_filename"] or "-"
    settings = resolver.for_path(Path(name))
    data = sys.stdin.buffer.read()
    profiles = ProfileCache()
    options = options_for(settings, name, profiles)
    fixing = bool(kw["fix"] or kw["diff"])
    unsafe = kw["unsafe_fixes"] if kw["unsafe_fixes"] is not None else settings.unsafe_fixes
    if not fixing:
        result = lint_bytes(data, name, options)
        return _report(Run([result] if (result.findings or result.error) else [], 1), settings, kw, fixing=False, unsafe=unsafe)
    try:
        source = decode(data)
    except DecodeError:
        result = lint_bytes(data, name, options)
        if not kw["diff"]:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        return _report(Run([result], 1), settings, kw, fixing=True, unsafe=unsafe, stream=sys.stderr)
    result = FileResult(name, source=source)
    fixed = source.text
    try:
        fixed, result.findings, result.applied = fix_text(source.text, name, options, unsafe=unsafe)
        out = source.encode(fixed)
    except Exception as exc:
        # Whatever happens, an editor piping through us gets its code back.
        fixed, out = source.text, data
        result.applied = {}
        result.error = str(exc) if isinstance(exc, FixFailed) else f"internal error while fixing: {type(exc).__name__}: {exc}"
        try:
            result.findings = lint_bytes(data, name, options).findings
        except Exception:
            result.findings = []
    if kw["diff"]:
        diff = unified_diff(name, source.text, fixed)
        click.echo(writable(diff, sys.stdout), nl=False)
        if result.error:
            click.echo(f"{name}: error: {result.error}", err=True)
            return EXIT_FINDINGS
        return EXIT_FINDINGS if diff else EXIT_CLEAN
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    run = Run([result] if (result.findings or result.error or result.applied) else [], 1)
    return _report(run, settings, kw, fixing=True, unsafe=unsafe, stream=sys.stderr)


def _fix_from_verify(resolver, kw) -> int:
    """``loadlint fix --from-verify REPORT``: write each confirmed call site's
    measured configuration into its call, under the same checks as any fix."""
    from loadlint.api import FixRequest, ProfileCache, Run, _fix_file, options_for
    from loadlint.engine import FileResult
    from loadlint.fixes import Positions, ReportError, load_verify_report, measured_specs

    try:
        sites, skipped = load_verify_report(kw["from_verify"])
    except ReportError as exc:
        fail(str(exc))
    for note in skipped:
        click.echo(f"loadlint: {note}", err=True)
    roots = [Path(p).resolve() for p in kw["paths"]]
    by_file: dict[str, list] = {}
    for site in sites:
        target = Path(site.path).resolve()
        if roots and not any(target == r or r in target.parents for r in roots):
            continue
        shown = os.path.relpath(site.path)
        by_file.setdefault(site.path if shown.startswith("..") else shown, []).append(site)
    profiles = ProfileCache()
    request = FixRequest(unsafe=False, dry_run=bool(kw["diff"]))
    run = Run()
    first = None
    for file, file_sites in sorted(by_file.items()):
        settings = resolver.for_path(Path(file))
        first = first or settings
        run.files += 1

        def source(text, analysis, file_sites=file_sites):
            import libcst as cst

            positions = analysis.positions if analysis is not None else Positions(cst.parse_module(text), text)
            return measured_specs(file_sites, text, positions)

        try:
            data = Path(file).read_bytes()
        except OSError as exc:
            run.results.append(FileResult(file, error=f"cannot read file: {exc.strerror or exc}"))
            continue
        result = _fix_file(Path(file), data, options_for(settings, file, profiles), request, external=source)
        if result.findings or result.error or result.fixed is not None:
            run.results.append(result)
    settings = first or resolver.for_path(Path("."))
    if kw["diff"]:
        return _print_diff(run)
    return _report(run, settings, kw, fixing=True, unsafe=False)


def _print_diff(run) -> int:
    """``--diff``: the fixes as one unified diff on stdout; failures on stderr.
    Exit 1 when there is a diff or a file could not be fixed."""
    chunks = []
    fixed_count = 0
    for result in run.results:
        if result.fixed is not None and hasattr(result, "unified_diff"):
            chunks.append(result.unified_diff())  # a notebook: one diff per changed cell
            fixed_count += sum(result.applied.values())
        elif result.fixed is not None and result.source is not None:
            chunks.append(unified_diff(result.path, result.source.text, result.fixed))
            fixed_count += sum(result.applied.values())
    text = "".join(chunks)
    click.echo(writable(text, sys.stdout), nl=False)
    failed = [r for r in run.results if r.error]
    for result in failed:
        click.echo(f"{result.path}: error: {result.error}", err=True)
    if fixed_count:
        click.echo(f"Would fix {fixed_count} error{'s' if fixed_count != 1 else ''}.", err=True)
    return EXIT_FINDINGS if text or failed else EXIT_CLEAN


def _diff_lines(text: str) -> list[str]:
    # Python's own line breaks only: str.splitlines() also breaks on form
    # feeds and Unicode separators, which would garble the hunks.
    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text)


def unified_diff(path: str, before: str, after: str) -> str:
    if before == after:
        return ""
    lines = difflib.unified_diff(_diff_lines(before), _diff_lines(after), fromfile=f"a/{path}", tofile=f"b/{path}")
    text = "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in lines)
    return text


def _report(run, settings, kw, *, fixing: bool, unsafe: bool, stream=None) -> int:
    from loadlint.report import HUMAN_FORMATS, Style, formatter, source_lines, statistics, summarize, use_color

    fmt = kw["output_format"] or settings.output_format or "full"
    summary = summarize(run, unsafe, fixing)
    summary.enabled = settings.codes()
    out_file = kw["output_file"]
    stream = stream or sys.stdout
    color = use_color(kw["color"], stream) and fmt in HUMAN_FORMATS and not out_file
    style = Style(color)
    if kw["statistics"]:
        text = statistics(run, summary)
    else:
        text = formatter(fmt)(run, summary, style, source_lines(run.results) if fmt in HUMAN_FORMATS else {})
        if kw["quiet"] and fmt in HUMAN_FORMATS:
            text = "\n".join(line for line in text.splitlines() if not _is_summary(line)) + "\n"
            text = "" if not text.strip() else text
    if kw["show_fixes"] and summary.fixed and fmt in HUMAN_FORMATS and not kw["statistics"]:
        # ruff's place for it: after the findings, before the summary.
        body = text.splitlines(keepends=True)
        cut = len(body)
        while cut and _is_summary(body[cut - 1]):
            cut -= 1
        text = "".join(body[:cut]) + "\n" + _fixed_listing(run) + "\n" + "".join(body[cut:])
    if out_file:
        try:
            Path(out_file).parent.mkdir(parents=True, exist_ok=True)
            Path(out_file).write_bytes(_encoded(text))
        except OSError as exc:
            fail(f"cannot write {out_file}: {exc.strerror or exc}")
    else:
        # click strips escape codes from non-TTY streams unless told otherwise,
        # which would make --color always / FORCE_COLOR useless in CI logs.
        click.echo(writable(text, stream), nl=False, file=stream, color=style.color)
    return exit_code(run, kw, summary)


# File names that are not UTF-8 reach reports as lone surrogates
# (os.fsdecode), and so can source lines of a notebook (JSON escapes).  A
# stream that cannot encode them must not fail the report at its last step.


def writable(text: str, stream) -> str:
    """``text`` as ``stream`` can encode it, unencodable characters escaped."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding, getattr(stream, "errors", None) or "strict")
    except UnicodeEncodeError:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:
        pass
    return text


def _encoded(text: str) -> bytes:
    """UTF-8 for a report file: a non-UTF-8 file name as its own bytes."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace")


def _is_summary(line: str) -> bool:
    return line.startswith(("Found ", "No safe fixes", "All checks passed", "[*] ", "\x1b[36m[*]", "\x1b[1mAll checks"))


def _fixed_listing(run) -> str:
    """``--show-fixes``, ruff's layout: a total, then per file the count per rule."""
    from loadlint.rules import CODES, name_of

    tables = [(r.path, r.applied) for r in run.results if r.applied]
    if not tables:
        return ""
    total = sum(sum(applied.values()) for _, applied in tables)
    width = max(len(str(n)) for _, applied in tables for n in applied.values())
    lines = [f"Fixed {total} error{'s' if total != 1 else ''}:"]
    for path, applied in sorted(tables):
        lines.append(f"- {path}:")
        for code, count in sorted(applied.items()):
            name = name_of(code) if code in CODES else "measured-configuration"
            lines.append(f"    {count:>{width}} × {code} ({name})")
    return "\n".join(lines) + "\n"


def exit_code(run, kw, summary) -> int:
    if any(r.error for r in run.results):
        return EXIT_FINDINGS if not kw["exit_zero"] else EXIT_CLEAN
    if kw["exit_non_zero_on_fix"] and summary.fixed:
        return EXIT_FINDINGS
    if run.findings and not kw["exit_zero"]:
        return EXIT_FINDINGS
    return EXIT_CLEAN


@cli.command("hardware")
@click.option("--json", "as_json", is_flag=True, help="Print the profile as JSON.")
@click.option("--target", "targets", multiple=True, metavar="SPEC", help="Apply a target over the detected profile.")
def hardware_command(as_json: bool, targets: tuple[str, ...]) -> None:
    """Print the hardware profile the rules use."""
    import json

    from loadlint.hardware import TargetError, format_profile, profile_to_dict, resolve_profile

    try:
        profile = resolve_profile(_parse_targets(targets) or None)
    except TargetError as exc:
        fail(str(exc))
    if as_json:
        click.echo(json.dumps(profile_to_dict(profile), indent=2))
    else:
        click.echo(format_profile(profile))


@cli.command("rule")
@click.argument("code", required=False)
@click.option("--all", "all_rules", is_flag=True, help="Print every rule.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text")
def rule_command(code: str | None, all_rules: bool, output_format: str) -> None:
    """Explain a rule (its documentation page)."""
    import json

    from loadlint.rules import CODES, rule_class

    if all_rules == bool(code):
        fail("give a rule code (loadlint rule LL201) or --all")
    codes = sorted(CODES) if all_rules else [code.upper()]  # type: ignore[union-attr]
    for c in codes:
        if c not in CODES:
            fail(f"unknown rule code '{code}'")
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
        click.echo(json.dumps(payload if all_rules else payload[0], indent=2))
    else:
        click.echo("\n".join(r.documentation() for r in rules), nl=False)


@cli.command("clean")
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=str), envvar="LOADLINT_CACHE_DIR")
def clean_command(paths: tuple[str, ...], cache_dir: str | None) -> None:
    """Remove the cache folder."""
    from loadlint.cache import DEFAULT_DIR, clean, is_cache_dir

    folders = [Path(cache_dir)] if cache_dir else [Path(p) / DEFAULT_DIR for p in (paths or (".",))]
    for folder in folders:
        if not folder.is_dir():
            continue
        # --cache-dir can name any folder; only one loadlint tagged is deleted.
        if not is_cache_dir(folder):
            click.echo(f"loadlint: warning: not removing {folder}: it is not a loadlint cache (no CACHEDIR.TAG)", err=True)
            continue
        click.echo(f"Removing cache at: {folder}")
        clean(folder)


def main(argv: list[str] | None = None) -> int:
    try:
        cli.main(args=argv, prog_name="loadlint", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("loadlint: interrupted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return EXIT_ERROR
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_ERROR)
    except KeyboardInterrupt:
        click.echo("loadlint: interrupted", err=True)
        return 130
    return EXIT_CLEAN
