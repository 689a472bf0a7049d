"""The child process's entry: read the spec, capture, run the mode, write
one JSON result and leave without waiting for the user's threads."""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

from loadlint.hardware.detect import detect
from loadlint.verify import measure
from loadlint.verify.child.bench import Bench
from loadlint.verify.child.capture import describe, install_capture, run_user_code, uninstall_capture
from loadlint.verify.child.cuda import h2d_bandwidth
from loadlint.verify.child.ddp import run_ddp, run_ddp_sim
from loadlint.verify.child.insitu import run_insitu
from loadlint.verify.child.probes import preflight
from loadlint.verify.child.state import State
from loadlint.verify.child.tune import search, sweep

#: Seconds of measuring when the parent names no budget.
DEFAULT_BUDGET_S = 90.0


def main(spec_path: str) -> None:
    """Run the spec at ``spec_path`` and exit this process."""
    with open(spec_path) as fh:
        spec = json.load(fh)
    state = State(spec)
    out_path = spec["out"]
    if spec.get("mode") == "ddp":
        out_path = out_path.replace("{rank}", os.environ.get("RANK", "0"))
    result: dict[str, Any] = {"mode": spec["mode"]}
    code = 0
    try:
        try:
            import torch
        except ImportError:
            result["error"] = {"kind": "no_torch",
                               "message": f"torch is not installed for {sys.executable} (pip install 'loadlint[verify]')"}
        else:
            install_capture(torch, state)
            dispatch(torch, state, result)
    except KeyboardInterrupt:
        result["error"] = {"kind": "interrupted", "message": "interrupted"}
        code = 130
    except BaseException as exc:  # reported, never a traceback on the console
        result["error"] = {"kind": "internal",
                           "message": f"{type(exc).__name__}: {exc}",
                           "traceback": traceback.format_exc()}
    if measure.gate_limits()[2]:
        state.notes.append("the contention gate was relaxed (LOADLINT_VERIFY_GATE_SCALE): runs "
                           "on a busy machine are not flagged and too few pairs are never "
                           "called contended")
    result["notes"] = result.get("notes", []) + state.notes
    result["captured"] = state.records
    tmp = out_path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(result, fh, default=describe)
    os.replace(tmp, out_path)
    sys.stdout.flush()
    sys.stderr.flush()
    # The user's script may leave non-daemon threads or atexit hooks that
    # would keep this process alive; the parent cleans up our process group.
    os._exit(code)


def dispatch(torch: Any, state: State, result: dict[str, Any]) -> None:
    """Run the spec's mode, filling ``result``."""
    spec = state.spec
    mode = spec["mode"]
    state.progress("script")
    if mode == "insitu":
        r = run_insitu(torch, state, detect())
        result["run"] = r
        outcome_error(state, r.get("outcome", {}), result)
        return
    if mode == "ddp":
        result["rank"] = run_ddp(torch, state)
        outcome_error(state, result["rank"]["outcome"], result)
        return
    if mode == "ddp_sim":
        r = run_ddp_sim(torch, state)
        result["ranks"] = r.get("ranks")
        outcome_error(state, r["outcome"], result)
        return
    outcome = run_user_code(state, spec)
    uninstall_capture(torch, state)
    if state.target is None and state.records and not (spec.get("target") or {}).get("at"):
        state.target = 0
        state.target_instance = None
        if (spec.get("target") or {}).get("finding_sites"):
            state.notes.append("no loader with a static finding was built; measured the first one")
    outcome_error(state, outcome, result)
    if "error" in result:
        return
    run_bench(torch, state, outcome, result)


def run_bench(torch: Any, state: State, outcome: dict[str, Any], result: dict[str, Any]) -> None:
    """``bench`` mode once the target loader is captured."""
    assert state.target is not None
    spec = state.spec
    rec = state.records[state.target]
    if outcome["outcome"] == "crashed":
        state.notes.append(f"the script crashed after building its loader ({outcome['type']}); "
                           "the loader was measured anyway")
    arguments = state.objects[state.target]
    profile = detect()
    bench = Bench(torch, state, rec, arguments, profile)
    result["call"] = rec
    result["preflight"] = preflight(torch, profile, arguments)
    if rec["class"] != "torch.utils.data.dataloader.DataLoader":
        state.notes.append(f"{rec['class']} measured as torch.utils.data.DataLoader with the "
                           "same arguments: behaviour the subclass adds is not timed")
    cands = bench.candidates()
    bench.equivalence(cands)
    result["candidates"] = cands
    if not spec.get("measure", True):
        return
    # The budget bounds the measuring: the search and the paired rounds.
    state.budget_s = float(spec.get("budget_s") or DEFAULT_BUDGET_S)
    deadline = state.deadline = time.perf_counter() + state.budget_s
    calib = seconds = None
    if spec.get("tune") in ("search", "sweep"):
        cands, result["sweep"], info = (search(bench, cands, deadline) if spec["tune"] == "search"
                                        else sweep(bench, cands))
        calib, seconds = info.pop("calibration"), info.pop("seconds")
        result["search"] = dict(info, mode=spec["tune"])
        result["candidates"] = cands
    if len([c for c in cands if c.get("equivalence", {}).get("equivalent")]) < 2:
        state.notes.append("no other equivalent configuration to compare: the current one "
                           "was measured alone")
    result["bench"] = bench.benchmark(cands, deadline, calib, seconds)
    if bench.cuda:
        result["cuda"] = h2d_bandwidth(torch, arguments, rec["config"])


def outcome_error(state: State, outcome: dict[str, Any], result: dict[str, Any]) -> None:
    """Set ``result["error"]`` when no target loader was captured."""
    at = (state.spec.get("target") or {}).get("at")
    if state.target is not None:
        return
    kind = outcome.get("outcome")
    if kind == "crashed":
        where = f" at {outcome['where']}" if outcome.get("where") else ""
        msg = f"{outcome['type']}{': ' + outcome['message'] if outcome['message'] else ''}{where}"
        result["error"] = {"kind": "crash", "message": msg}
    elif at:
        built = ", ".join(f"{os.path.relpath(r['file'])}:{r['line']}" for r in state.records) or "none"
        result["error"] = {"kind": "no_loader_at",
                           "message": f"no DataLoader was built at {at['file']}:{at['line']} "
                                      f"(loaders built: {built})"}
    elif kind == "exited" and outcome.get("code"):
        detail = f": {outcome['message']}" if outcome.get("message") else ""
        result["error"] = {"kind": "crash",
                           "message": f"the script exited with status {outcome['code']}{detail} "
                                      "before building a DataLoader"}
    else:
        result["error"] = {"kind": "no_loader", "message": "the script finished without building a DataLoader"}
