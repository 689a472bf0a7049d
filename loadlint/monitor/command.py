"""``loadlint monitor``: run the script in a child process with its loaders
instrumented, pass its output through, keep its exit status, then report.

Importing this module stays cheap: torch is only imported in the child.
The child shares the terminal's process group, so Ctrl-C reaches the
script as it would under ``python``; this process waits for the child to
leave its measurements and reports them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, Callable

import click

from loadlint.sources.source import visible, visible_json, visible_lines
from loadlint.verify.runner import TOKEN_ENV, cleanup

BOOT = str(Path(__file__).parent.parent / "verify" / "_boot.py")
EXIT_ERROR = 2


def _fail(message: str) -> None:
    click.echo(f"loadlint: error: {visible(message)}", err=True)
    sys.exit(EXIT_ERROR)


@click.command("monitor")
@click.argument("script", type=click.Path(dir_okay=False, path_type=str))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--tune", is_flag=True, help="Try loader configurations on the real step and keep the fastest (same data).")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text",
              help="The report on stdout as text (table, tuning, findings) or JSON (trace's contract).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=str), default=None, metavar="FILE",
              help="Write the JSON report (with --tune, the input of `loadlint fix --from-verify`).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=str), default=None, metavar="FILE.png",
              help="Draw data wait and GPU busy per step (needs the 'plot' extra).")
@click.option("--no-static", is_flag=True, help="Do not check the loaders' calls for their static findings.")
@click.option("--nproc", type=click.IntRange(min=1), default=None, metavar="N",
              help="Run the script as N ranks under torch.distributed.run (one node) and join their reports.")
def monitor(script: str, args: tuple[str, ...], tune: bool, output_format: str, output: str | None,
            plot_path: str | None, no_static: bool, nproc: int | None) -> None:
    """Run SCRIPT as `python SCRIPT ARGS` would, watching every DataLoader it
    builds; report where loading holds the run back.  The script's own
    options go after `--`.  Exits with the script's exit status."""
    if not os.path.isfile(script):
        _fail(f"{script}: no such file")
    if nproc is not None and importlib.util.find_spec("torch") is None:
        _fail(f"--nproc needs torch for {sys.executable} (torch.distributed.run starts the ranks)")
    command = ["python", script, *args]
    if nproc is not None:
        command = ["python", "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", script, *args]
    with tempfile.TemporaryDirectory(prefix="loadlint-monitor-") as tmp:
        out = os.path.join(tmp, "result.rank{rank}.json" if nproc else "result.json")
        spec = {"script": os.path.abspath(script), "args": list(args), "tune": tune, "out": out}
        spec_path = os.path.join(tmp, "spec.json")
        Path(spec_path).write_text(json.dumps(spec))
        code, interrupted = _run_child(spec_path, nproc)
        raws = [_read(path) for path in sorted(Path(tmp).glob("result*.json"))]
    ranks = [r for r in raws if r is not None]
    raw = ranks[0] if len(ranks) == 1 and not nproc else None
    if nproc and ranks:
        _distributed(ranks, nproc, command, code, interrupted, output, output_format, plot_path, no_static)
        return
    if raw is None:
        click.echo("loadlint: monitor: the script ended before the monitor could write its measurements; no report", err=True)
        sys.exit(130 if interrupted else code)
    from loadlint.hardware.cpus import usable_here
    from loadlint.monitor.report import as_text, build

    def single() -> tuple[dict[str, Any], Callable[[dict[str, Any]], str]]:
        gpu = (raw.get("sampling") or {}).get("gpu") or {}
        raw["machine"] = {"usable_cpus": usable_here(), "gpu_count": gpu.get("count", 0),
                          "loadavg": [round(x, 2) for x in os.getloadavg()]}
        return build(raw, command, static=not no_static), as_text

    _emit(single, output, output_format, plot_path)
    sys.exit(130 if interrupted and code == 0 else code)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def _distributed(raws: list[dict[str, Any]], nproc: int, command: list[str], code: int, interrupted: bool,
                 output: str | None, output_format: str, plot_path: str | None, no_static: bool) -> None:
    """The ranks' reports joined (:mod:`loadlint.monitor.ranks`), written as one report is."""
    from loadlint.hardware.cpus import usable_here
    from loadlint.monitor.ranks import join, joined_text
    from loadlint.monitor.report import build

    def joined() -> tuple[dict[str, Any], Callable[[dict[str, Any]], str]]:
        reports: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for raw in sorted(raws, key=lambda r: (r.get("rank") or {}).get("rank", 0)):
            gpu = (raw.get("sampling") or {}).get("gpu") or {}
            raw["machine"] = {"usable_cpus": usable_here(), "gpu_count": gpu.get("count", 0),
                              "loadavg": [round(x, 2) for x in os.getloadavg()]}
            # The ranks run the same call: its static findings are read once.
            reports.append((raw.get("rank") or {}, build(raw, command, static=not no_static and not reports)))
        return join(reports, nproc, command, code), joined_text

    _emit(joined, output, output_format, plot_path)
    sys.exit(130 if interrupted and code == 0 else code)


def _emit(make: Callable[[], tuple[dict[str, Any], Callable[[dict[str, Any]], str]]], output: str | None,
          output_format: str, plot_path: str | None) -> None:
    """Builds the report and writes it where asked: a failure is one line,
    and the script's exit status stays."""
    from loadlint.monitor.report import as_json

    try:
        report, text = make()
        if output:
            Path(output).write_text(visible_json(json.dumps(as_json(report), indent=2)) + "\n")
        if plot_path:
            _plot(output or "", report, plot_path)
        if output_format == "json":
            click.echo(visible_json(json.dumps(as_json(report), indent=2)))
        else:
            click.echo(visible_lines(text(report)), nl=False)
        if output:
            click.echo(f"loadlint: wrote {visible(output)}", err=True)
    except OSError as exc:
        click.echo(f"loadlint: error: cannot write the report: {visible(str(exc.strerror or exc))}", err=True)
    except Exception as exc:  # one line, not a traceback; the script's status stays
        if os.environ.get("LOADLINT_DEBUG"):
            raise
        click.echo(f"loadlint: error: internal error in the report: {type(exc).__name__}: {visible(str(exc))}", err=True)


def _run_child(spec_path: str, nproc: int | None = None) -> tuple[int, bool]:
    """The child's exit status, and whether Ctrl-C came while it ran."""
    token = uuid.uuid4().hex
    env = dict(os.environ, **{TOKEN_ENV: token})
    launch = [sys.executable, BOOT, spec_path, "loadlint.monitor.child"]
    if nproc is not None:
        launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
                  "--max_restarts=0", *launch[1:]]
    proc = subprocess.Popen(launch, env=env)
    interrupted = False
    while True:
        try:
            proc.wait()
            break
        except KeyboardInterrupt:
            # The script got the same Ctrl-C: wait for it to leave its figures.
            interrupted = True
            if _second(proc):
                break
    cleanup(proc, token)
    code = proc.returncode if proc.returncode is not None else 130
    if code < 0:
        code = 128 - code if code != -signal.SIGINT else 130
    return code, interrupted


def _second(proc: subprocess.Popen[bytes]) -> bool:
    """After a Ctrl-C: wait up to 10 s for the child; a second Ctrl-C or
    the wait running out ends it."""
    try:
        proc.wait(timeout=10)
    except KeyboardInterrupt:
        proc.kill()
        return True
    except subprocess.TimeoutExpired:
        proc.terminate()
        return True
    return True


def _plot(_: str, report: dict[str, Any], path: str) -> None:
    try:
        from loadlint.monitor.plot import draw
    except ImportError as exc:
        _fail(f"--plot needs the 'plot' extra: pip install 'loadlint[plot]' ({exc})")
    draw(report, Path(path))
    click.echo(f"loadlint: wrote {visible(path)}", err=True)
