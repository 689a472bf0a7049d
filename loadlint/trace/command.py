"""``loadlint trace``: the command line over :mod:`loadlint.trace` (the only
module of the package that imports click)."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import click

from loadlint.sources.source import visible, visible_json
from loadlint.trace.analyse import Diagnosis, diagnose_paths
from loadlint.trace.report import as_json, as_text, compare_json, compare_text
from loadlint.trace.stream import TraceError
from loadlint.types import Target

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _fail(message: str) -> None:
    click.echo(f"loadlint: error: {visible(message)}", err=True)
    sys.exit(EXIT_ERROR)


@click.command("trace")
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--compare", nargs=2, type=click.Path(path_type=str), metavar="BEFORE AFTER",
              help="Two traces (or folders of ranks) side by side, with the ratio of median step times.")
@click.option("--source", "source", type=click.Path(exists=True, path_type=str), metavar="DIR",
              help="The training project: map the loader to its DataLoader(...) call and attach its static findings.")
@click.option("--fix", is_flag=True, help="With --source: apply the mapped call's safe fixes and print the diff.")
@click.option("--target", "targets", multiple=True, metavar="SPEC",
              help="The hardware the run trained on, for the static findings' suggestions (cpus=64,gpus=8,...).")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", help="The diagnosis as text (tables, then findings) or as JSON (the contract in docs/trace.md).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=str), metavar="FILE.png",
              help="Draw GPU busy and data wait per step (needs the 'plot' extra).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option("-j", "--jobs", type=int, default=None, help="Processes for the ranks (default: the usable CPUs).")
def trace(paths: tuple[str, ...], compare: tuple[str, str] | None, source: str | None, fix: bool, targets: tuple[str, ...],
          output_format: str, plot_path: str | None, exit_zero: bool, jobs: int | None) -> None:
    """Diagnose the input pipeline from PyTorch profiler traces (.json or
    .json.gz, a file or a folder of per-rank traces).  Runs nothing."""
    if fix and not source:
        _fail("--fix needs --source DIR (the training project to fix)")
    if compare and paths:
        _fail("give either traces or --compare BEFORE AFTER, not both")
    if not compare and not paths:
        _fail("give a trace file or folder (loadlint trace PATH...)")
    from loadlint.hardware.detect import TargetError, parse_target
    from loadlint.workspace.config import ConfigError

    try:
        target = Target()
        for spec in targets:
            target = parse_target(spec).over(target)
        code = _compare(compare, output_format, jobs) if compare else _diagnose(paths, source, fix, target, output_format, plot_path, jobs)
    except (TraceError, TargetError, ConfigError) as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        click.echo("loadlint: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # one line, not a traceback
        if os.environ.get("LOADLINT_DEBUG"):
            raise
        _fail(f"internal error: {type(exc).__name__}: {exc}")
    sys.exit(EXIT_CLEAN if exit_zero else code)


def _diagnose(paths: tuple[str, ...], source: str | None, fix: bool, target: Target, output_format: str,
              plot_path: str | None, jobs: int | None) -> int:
    diagnoses = diagnose_paths([Path(p) for p in paths], jobs)
    from loadlint.trace.link import apply_fixes, link

    matches = link(diagnoses, Path(source) if source else None, target)
    if source and not matches:
        click.echo(f"loadlint: warning: no DataLoader call under {visible(source)} matches the traced loader", err=True)
    for d in diagnoses:
        if not d.rank.has_gpu:
            click.echo(f"loadlint: note: {visible(d.rank.path)}: no GPU events: GPU busy is not measured", err=True)
    if plot_path:
        _plot(diagnoses, plot_path)
    if output_format == "json":
        click.echo(_json(as_json(diagnoses)))
    else:
        click.echo(as_text(diagnoses), nl=False)
    if fix:
        text, count, unsure = apply_fixes(matches, target)
        for found in unsure:
            click.echo(f"loadlint: warning: not fixing {visible(str(found.call.path))}:{found.call.row}: "
                       f"the match is a guess ({visible(found.why)}); "
                       "point --source at the training script", err=True)
        # The JSON report stays the only thing on stdout.
        click.echo(text, nl=False, err=output_format == "json")
        click.echo(f"Fixed {count} problem{'s' if count != 1 else ''} in the mapped DataLoader call's file.", err=True)
    return EXIT_FINDINGS if any(d.findings for d in diagnoses) else EXIT_CLEAN


def _compare(compare: tuple[str, str], output_format: str, jobs: int | None) -> int:
    before = diagnose_paths([Path(compare[0])], jobs)
    after = diagnose_paths([Path(compare[1])], jobs)
    if output_format == "json":
        click.echo(_json(compare_json(before, after)))
    else:
        click.echo(compare_text(before, after), nl=False)
    return EXIT_FINDINGS if any(d.findings for d in after) else EXIT_CLEAN


def _json(report: Any) -> str:
    """The report as JSON: a figure that is not a finite number (a trace
    whose times overflow) is ``null``, never ``NaN`` or ``Infinity``; the
    trace's strings under the escaping rule of every printed line."""
    return visible_json(json.dumps(_finite(report), indent=2, allow_nan=False))


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _plot(diagnoses: list[Diagnosis], path: str) -> None:
    from loadlint.trace.plot import draw

    try:
        note = draw(diagnoses, Path(path))
    except ImportError as exc:
        _fail(f"--plot needs the 'plot' extra: pip install 'loadlint[plot]' ({exc})")
    if note is not None:
        click.echo(f"loadlint: warning: --plot: {note}", err=True)
    click.echo(f"loadlint: wrote {visible(path)}", err=True)
