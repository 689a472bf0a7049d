"""``loadlint verify``: run the user's DataLoader, measure the current
configuration against the suggested one, and give an honest verdict.

Importing this module must stay cheap: torch is only ever imported in the
subprocess the shim runs in.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import click

from loadlint.sources.source import visible
from loadlint.verify import measure
from loadlint.verify.progress import ProgressLine
from loadlint.verify.runner import Outcome, Workdir, run_shim

EXIT_OK = 0
#: The answer is a problem for CI: a --nproc check failed, or the suggested
#: configuration measured slower (refuted), or no answer (contended).
EXIT_PROBLEM = 1
EXIT_FAILED = 2
DEFAULT_BUDGET_S = 90.0


class VerifyError(Exception):
    """One line for stderr, exit status 2."""


def _parse_at(value: str | None) -> dict[str, Any] | None:
    if not value:
        return None
    path, sep, line = value.rpartition(":")
    if not sep or not path or not line.isdigit():
        raise click.BadParameter("expected FILE:LINE, e.g. train.py:42", param_hint="--at")
    return {"file": os.path.abspath(path), "line": int(line)}


_TRY_KEYS = {"num_workers": int, "prefetch_factor": int, "persistent_workers": bool,
             "pin_memory": bool, "multiprocessing_context": str, "timeout": float,
             "in_order": bool}


def _parse_try(values: tuple[str, ...]) -> list[dict[str, Any]]:
    out = []
    for value in values:
        config: dict[str, Any] = {}
        for part in value.split(","):
            key, sep, text = part.strip().partition("=")
            if not sep or key not in _TRY_KEYS:
                raise click.BadParameter(
                    f"{part!r}: expected KEY=VALUE with KEY one of {', '.join(_TRY_KEYS)}",
                    param_hint="--try")
            kind = _TRY_KEYS[key]
            if text in ("None", "none"):
                config[key] = None
            elif kind is bool:
                if text not in ("True", "False", "true", "false", "1", "0"):
                    raise click.BadParameter(f"{key} expects True or False", param_hint="--try")
                config[key] = text in ("True", "true", "1")
            else:
                try:
                    config[key] = kind(text)
                except ValueError:
                    kind_name = {"int": "an int", "float": "a float"}.get(kind.__name__, f"a {kind.__name__}")
                    raise click.BadParameter(f"{key}={text}: not {kind_name}", param_hint="--try") from None
        out.append(config)
    return out


@click.command("verify", context_settings={"ignore_unknown_options": False})
@click.argument("script", required=False, type=click.Path(dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--entry", metavar="MODULE:FUNCTION",
              help="Call this function (returns a Dataset or DataLoader) instead of running a script.")
@click.option("--at", "at", metavar="FILE:LINE",
              help="The DataLoader call to measure (default: the first with a static finding, "
                   "else the first built).")
@click.option("--tune", "tune", flag_value="sweep",
              help="Sweep every num_workers, persistent_workers and prefetch_factor point "
                   "instead of the adaptive search (slower).")
@click.option("--no-tune", "tune", flag_value="none",
              help="Compare only the configuration as written, the suggested one and --try.")
@click.option("--budget", type=click.FloatRange(min=1.0), default=DEFAULT_BUDGET_S,
              show_default=True, metavar="SECONDS",
              help="Seconds of measuring for the search and the paired rounds together.")
@click.option("--try", "tries", multiple=True, metavar="KEY=VALUE[,KEY=VALUE]",
              help="Measure this configuration too, e.g. --try num_workers=4,persistent_workers=True.")
@click.option("--step-ms", type=click.FloatRange(min=0), default=None,
              help="Simulate a training step of N ms per batch; report the share of time "
                   "waiting for data.")
@click.option("--in-situ", "in_situ", is_flag=True,
              help="Time the script's own loop with each candidate injected (one process per run).")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="--in-situ: measured steps per run (default: the protocol's batch minimum).")
@click.option("--nproc", type=click.IntRange(min=1), default=None,
              help="Run under torch.distributed.run with N ranks and check each rank's data split.")
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True,
              help="Paired rounds before a verdict is considered; more follow while one is "
                   f"undecided (a verdict needs {measure.MIN_PAIRS} pairs).")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=300.0, show_default=True,
              help="Seconds the script may run without building its loader (or a run without progress).")
@click.option("--min-seconds", type=click.FloatRange(min=0.0), default=None,
              help="Minimum measured seconds per run (default 2).")
@click.option("--min-batches", type=click.IntRange(min=1), default=None,
              help="Minimum measured batches per run (default 30; 10 per worker at least).")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Also write the JSON report to this file (for loadlint fix --from-verify).")
@click.option("--plot", type=click.Path(dir_okay=False), default=None, metavar="FILE.png",
              help="Draw every run per candidate, the paired ratios with their interval and, "
                   "when sampled, GPU utilisation (needs matplotlib).")
@click.option("--show-output", is_flag=True, help="Show the script's own output on stderr.")
@click.option("--wide", is_flag=True,
              help="Print every column of the table and never wrap (default: fit the terminal).")
@click.option("--exit-zero", is_flag=True,
              help="Exit 0 whatever the answer (default: 1 when a --nproc check fails, the "
                   "suggestion measured slower or the machine was too busy to answer).")
@click.option("--aa", is_flag=True, hidden=True,
              help="A/A test of the verdict: the configuration as written against itself.")
def verify(script: str | None, args: tuple[str, ...], entry: str | None, at: str | None,
           tune: str | None, budget: float, tries: tuple[str, ...], step_ms: float | None,
           in_situ: bool,
           steps: int | None, nproc: int | None, repeats: int, timeout: float,
           min_seconds: float | None, min_batches: int | None, output_format: str,
           output: str | None, plot: str | None, show_output: bool, wide: bool,
           exit_zero: bool, aa: bool) -> None:
    """Find the fastest DataLoader configuration of SCRIPT (run as `python
    SCRIPT ARGS`) that yields the same data: the configuration as written,
    the one `loadlint fix` would write and an adaptive search around them,
    confirmed in paired rounds against the current one.

    This executes SCRIPT. Everything before its DataLoader really runs.
    Pass the script's own arguments after `--`.
    """
    if bool(script) == bool(entry):
        raise click.UsageError("give either SCRIPT or --entry MODULE:FUNCTION")
    if script and not Path(script).is_file():
        raise click.UsageError(f"{script}: no such file")
    if entry and ":" not in entry:
        raise click.BadParameter("expected MODULE:FUNCTION", param_hint="--entry")
    mode = {"sweep": "sweep", "none": None}.get(tune or "", "search")
    if in_situ or aa:
        mode = None  # in-situ: each run is a whole process; A/A: nothing to search
    if nproc and (in_situ or tune == "sweep" or entry):
        raise click.UsageError("--nproc checks the data split; it does not combine with "
                               "--in-situ, --tune or --entry")
    if in_situ and entry:
        raise click.UsageError("--in-situ runs the script's own loop; it needs SCRIPT")
    target_at = _parse_at(at)
    protocol = measure.Protocol.from_env(batches_min=min_batches, seconds_min=min_seconds,
                                         repeats=repeats)
    opts = {
        "script": os.path.abspath(script) if script else None, "args": list(args),
        "entry": entry, "at": target_at, "tune": mode, "budget": budget,
        "tries": _parse_try(tries),
        "step_ms": step_ms, "in_situ": in_situ, "steps": steps, "nproc": nproc,
        "timeout": timeout, "protocol": protocol, "show_output": show_output,
        "progress": ProgressLine.for_terminal(output_format, show_output), "aa": aa,
    }
    try:
        report = execute(opts)
    except VerifyError as exc:
        click.echo(f"loadlint verify: error: {visible(str(exc))}", err=True)
        sys.exit(EXIT_FAILED)
    except KeyboardInterrupt:
        click.echo("loadlint verify: interrupted; every process it started was stopped", err=True)
        sys.exit(130)
    from loadlint.verify import report as rep

    if output:
        Path(output).write_text(rep.render_json(report))
    if plot:
        if report["mode"] == "ddp":
            click.echo("loadlint verify: note: --plot has nothing to draw for --nproc", err=True)
        else:
            try:
                rep.plot(report, plot)
            except rep.PlotUnavailable as exc:
                click.echo(f"loadlint verify: error: {visible(str(exc))}", err=True)
                sys.exit(EXIT_FAILED)
    width = None if wide or not sys.stdout.isatty() else shutil.get_terminal_size().columns
    click.echo(rep.render_json(report) if output_format == "json"
               else rep.render_text(report, output=output, width=width, wide=wide), nl=False)
    sys.exit(EXIT_OK if exit_zero or aa else exit_status(report))


def exit_status(report: dict[str, Any]) -> int:
    """1 when the answer is a problem CI should see, else 0."""
    if report["mode"] == "ddp":
        return EXIT_PROBLEM if (report.get("distributed") or {}).get("verdict") == "fail" else EXIT_OK
    verdicts = {s.get("verdict") for s in report.get("call_sites", [])}
    return EXIT_PROBLEM if verdicts & {"refuted", "contended"} else EXIT_OK


def _version() -> str:
    try:
        from loadlint import __version__
    except ImportError:
        return ""
    return __version__


def _describe_run(opts: dict[str, Any]) -> list[str]:
    if opts["entry"]:
        return [sys.executable, "-c", f"import {opts['entry'].split(':')[0]}; ..."]
    return [sys.executable, os.path.relpath(opts["script"]), *opts["args"]]


def _announce(opts: dict[str, Any], what: str) -> None:
    cmd = (f"{opts['entry']}() (imported from {os.getcwd()})" if opts["entry"]
           else " ".join(shlex.quote(x) for x in ["python", os.path.relpath(opts["script"]),
                                                  *opts["args"]]))
    click.echo(f"loadlint verify: will execute {visible(cmd)} in {visible(os.getcwd())} {what}; "
               f"timeout {opts['timeout']:g} s without progress", err=True)


def _base_spec(opts: dict[str, Any], mode: str) -> dict[str, Any]:
    from loadlint.verify.adapters import finding_sites

    target: dict[str, Any] = {"at": opts["at"], "finding_sites": None, "file": opts["script"]}
    if not opts["at"] and opts["script"]:
        sites = _within(finding_sites, opts["script"], min(opts["timeout"], 60.0))
        if sites and mode.startswith("ddp"):
            # A rank picks its loader as it is built, with no "else the first
            # built" afterwards: only the script's own rows, or any loader.
            sites = {k: v for k, v in sites.items() if k == os.path.abspath(opts["script"])} or None
        target["finding_sites"] = sites
    p = opts["protocol"]
    return {
        "mode": mode, "script": opts["script"], "args": opts["args"], "entry": opts["entry"],
        "cwd": os.getcwd(), "target": target,
        "protocol": {"warmup_min": p.warmup_min, "batches_min": p.batches_min,
                     "seconds_min": p.seconds_min, "repeats": p.repeats,
                     "per_worker": p.per_worker,
                     "warmup_per_worker": p.warmup_per_worker,
                     "extra_rounds": p.extra_rounds},
        "tries": opts["tries"], "tune": opts["tune"], "step_ms": opts["step_ms"],
        "budget_s": opts["budget"], "aa": opts["aa"],
    }


def _within(work: Callable[[str], dict[str, list[int]] | None], path: str, seconds: float) -> dict[str, list[int]] | None:
    """The static pre-check under the watchdog too: a project file that
    blocks a read (a FIFO named ``*.py``) must not hang verify before its
    child starts. After ``seconds`` it is abandoned (its daemon thread
    cannot keep the process alive) and the first loader built is measured."""
    box: dict[str, dict[str, list[int]] | None] = {}

    def run() -> None:
        box["rows"] = work(path)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        click.echo(f"loadlint verify: note: the static pre-check of {visible(os.path.relpath(path))} did not "
                   f"finish within {seconds:g} s; measuring the first loader built", err=True)
        return None
    return box.get("rows")


def execute(opts: dict[str, Any]) -> dict[str, Any]:
    work = Workdir()
    try:
        if opts["nproc"]:
            return _execute_ddp(opts, work)
        if opts["in_situ"]:
            return _execute_insitu(opts, work)
        return _execute_bench(opts, work)
    finally:
        work.close()


def _check(outcome: Outcome, opts: dict[str, Any], *, what: str = "the script") -> dict[str, Any]:
    """The result of a run, or a VerifyError naming what went wrong."""
    name = os.path.basename(opts["script"]) if opts["script"] else opts["entry"]
    if outcome.status == "hung":
        if outcome.phase in (None, "script"):
            raise VerifyError(f"{name} did not build a DataLoader within {opts['timeout']:g} s "
                              "(--timeout); it and its processes were stopped")
        raise VerifyError(f"{what} made no progress for {opts['timeout']:g} s during "
                          f"'{outcome.phase}' (a hang?); all its processes were stopped")
    result = outcome.result
    if result is None:
        tail = outcome.log_tail(1)
        raise VerifyError(f"{name} exited with status {outcome.returncode} without a result"
                          + (f": {tail}" if tail else ""))
    err = result.get("error")
    if err:
        kind = err.get("kind")
        if kind == "crash":
            raise VerifyError(f"{name} crashed before building its DataLoader: {err['message']}")
        if kind in ("no_loader", "no_loader_at", "no_torch"):
            raise VerifyError(f"{name}: {err['message']}")
        if kind == "interrupted":
            raise KeyboardInterrupt
        raise VerifyError(f"internal error while measuring {name}: {err['message']}")
    return result


def _execute_bench(opts: dict[str, Any], work: Workdir) -> dict[str, Any]:
    from loadlint.verify import report as rep

    spec = _base_spec(opts, "bench")
    _announce(opts, "under the verify shim (it stops once the DataLoader is built, "
                    f"then times fresh loaders in that process for at most {opts['budget']:g} s)")
    line: ProgressLine = opts["progress"]
    try:
        outcome = run_shim(spec, work, timeout=opts["timeout"], show_output=opts["show_output"],
                           on_progress=line.update)
    finally:
        line.clear()
    raw = _check(outcome, opts, what="the benchmark")
    mode = "step" if opts["step_ms"] else "loader"
    return rep.build_report(raw, mode=mode, command=_describe_run(opts), version=_version())


def _execute_insitu(opts: dict[str, Any], work: Workdir) -> dict[str, Any]:
    from loadlint.verify import report as rep

    spec = _base_spec(opts, "bench")
    spec["measure"] = False
    _announce(opts, "once to capture its DataLoader, then once per candidate and repeat "
                    "with that candidate injected into its own loop")
    raw = _check(run_shim(spec, work, timeout=opts["timeout"], show_output=opts["show_output"]),
                 opts)
    call = raw["call"]
    p = opts["protocol"]
    cands = [c for c in raw["candidates"]
             if not c.get("error") and (c.get("equivalence") or {}).get("equivalent")]
    steps = opts["steps"] or max(p.measured(int(c["config"]["num_workers"] or 0)) for c in cands)
    for c in cands:
        c["runs"] = []
    line: ProgressLine = opts["progress"]
    deadline = time.monotonic() + opts["budget"]
    done = 0
    active = list(cands)
    try:
        while True:
            for c in active[done % len(active):] + active[:done % len(active)]:
                left = max(0.0, deadline - time.monotonic())
                line.update({"phase": "insitu", "candidate": c["name"], "round": done + 1,
                             "runs": sum(len(x["runs"]) for x in cands), "left_s": left,
                             "budget_s": opts["budget"]})
                _insitu_run(opts, work, spec, call, c, steps, done)
            done += 1
            if time.monotonic() > deadline:
                break
            if done < p.repeats:
                continue
            pending = [c for c in cands[1:] if not c.get("error") and measure.decide(
                measure.runs_of(cands[0]["runs"]), measure.runs_of(c["runs"]),
                busy_share=measure.busy_share_limit(),
            ).verdict in ("inconclusive", "contended")]
            if not pending or done >= p.max_rounds:
                break
            active = [cands[0], *pending]
    finally:
        line.clear()
    return rep.build_report(raw, mode="in-situ", command=_describe_run(opts), version=_version())


def _insitu_run(opts: dict[str, Any], work: Workdir, base: dict[str, Any],
                call: dict[str, Any], cand: dict[str, Any], steps: int, round_: int) -> None:
    if cand.get("error"):
        return
    p = opts["protocol"]
    nw = int(cand["config"]["num_workers"] or 0)
    spec = dict(base, mode="insitu")
    spec["insitu"] = {"call": {"file": call["file"], "line": call["line"]},
                      "config": cand["config"], "warmup": p.warmup(nw, cand["config"].get("prefetch_factor")),
                      "steps": steps}
    outcome = run_shim(spec, work, timeout=opts["timeout"], show_output=opts["show_output"])
    result = _check(outcome, opts, what=f"the in-situ run of {cand['name']}")
    run = result.get("run") or {}
    if run.get("error") or "rate" not in run:
        cand["error"] = {"type": "InSituError",
                         "message": run.get("error") or "the loop did not reach the target loader"}
        return
    run["round"] = round_
    cand["runs"].append(run)


def _execute_ddp(opts: dict[str, Any], work: Workdir) -> dict[str, Any]:
    from loadlint.verify import ddp

    n = opts["nproc"]
    spec = _base_spec(opts, "ddp")
    spec["ddp"] = {"epochs": 3, "batches": 2}
    _announce(opts, f"as {n} ranks under torch.distributed.run --standalone (gloo, loopback); "
                    "each rank records its sampler's indices for 3 truncated epochs")
    env = {"GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": "127.0.0.1",
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    outcome = run_shim(spec, work, timeout=opts["timeout"], show_output=opts["show_output"],
                       nproc=n, env=env)
    notes: list[str] = []
    ranks: list[dict[str, Any]] = [
        r["rank"] for r in outcome.results
        if r.get("rank") and not r.get("error")
        and r["rank"].get("epochs") is not None and "sampler" in r["rank"]]
    simulated = False
    reason = ""
    call = None
    if len(ranks) == n:
        call = _call_of(outcome.results[0])
        for r in ranks:
            notes.extend(x for x in r.get("notes", []) if x not in notes)
    else:
        text = outcome.log + " ".join(str((r.get("error") or {}).get("message", ""))
                                      for r in outcome.results)
        if outcome.status == "hung":
            raise VerifyError(f"the {n} ranks made no progress for {opts['timeout']:g} s; "
                              "all their processes were stopped")
        if not ddp.needs_cuda(text):
            first_err = next((r.get("error") for r in outcome.results if r.get("error")), None)
            if first_err and first_err.get("kind") == "crash":
                raise VerifyError(f"{os.path.basename(opts['script'])} crashed under "
                                  f"--nproc {n}: {first_err['message']}")
            if first_err:
                raise VerifyError(f"{os.path.basename(opts['script'])}: {first_err['message']}")
            raise VerifyError(f"{os.path.basename(opts['script'])} under torch.distributed.run "
                              f"gave no result: {outcome.log_tail(1) or 'no output'}")
        reason = "the script needs CUDA/NCCL, which this machine lacks"
        click.echo(f"loadlint verify: the ranks need CUDA/NCCL, which this machine lacks; "
                   f"will execute python {visible(os.path.relpath(opts['script']))} once more without a "
                   f"process group, stop at its DataLoader and simulate DistributedSampler "
                   f"for {n} ranks", err=True)
        sim = dict(_base_spec(opts, "ddp_sim"), ddp={"nproc": n})
        res = _check(run_shim(sim, work, timeout=opts["timeout"], show_output=opts["show_output"],
                              env={"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
                                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29533"}),
                     opts)
        ranks = res["ranks"]
        simulated = True
        call = _call_of(res)
        notes.append("simulated from the script's own sampler settings; set_epoch calls "
                     "were not observed")
    verdict = ddp.compare(ranks)
    verdict.update(nproc=n, simulated=simulated, simulated_reason=reason, call=call,
                   batches_per_epoch=spec["ddp"]["batches"],
                   backend=(ranks[0].get("backend") if ranks else None))
    return {
        "schema": "loadlint.verify/1", "loadlint": _version(), "mode": "ddp",
        "command": ["python", "-m", "torch.distributed.run", "--standalone",
                    f"--nproc_per_node={n}", *_describe_run(opts)[1:]],
        "machine": {}, "ceiling": None, "call_sites": [], "cuda": None, "gpu": None,
        "distributed": verdict, "notes": notes,
    }


def _call_of(result: dict[str, Any]) -> dict[str, Any] | None:
    rank = result.get("rank") or {}
    idx = rank.get("target_index")
    captured = result.get("captured") or []
    if idx is None:
        idx = next((i for i, _ in enumerate(captured)), None)
    if idx is None or idx >= len(captured):
        return None
    c = captured[idx]
    return {"file": c["file"], "line": c["line"], "end_line": c["end_line"]}
