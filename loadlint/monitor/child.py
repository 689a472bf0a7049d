"""The monitored process: instrument torch, run the script as ``python
SCRIPT ARGS`` would, and leave the measurements in a file for the parent.

The script's exit status is kept: 0 when it returns, its ``SystemExit``
code, 1 after an uncaught exception (its traceback printed as Python
prints it, without this module's frames) and 130 after Ctrl-C.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from typing import Any

from loadlint.monitor.instrument import LoaderLog, Monitor, copy_hook, install
from loadlint.monitor.sampling import Sampler, status_stream
from loadlint.verify.child.capture import CHILD_DIR, script_main

HERE = os.path.dirname(os.path.abspath(__file__))


def main(spec_path: str) -> None:
    with open(spec_path) as fh:
        spec = json.load(fh)
    torch: Any
    try:
        import torch
    except ImportError:
        torch = None
    cuda = bool(torch is not None and torch.cuda.is_available())
    monitor = Monitor(look_pinned=cuda)
    place = rank_place()
    if place is not None:
        # torch.distributed.run stops its ranks with SIGTERM (after a Ctrl-C
        # reaches it): the rank still leaves its measurements.
        signal.signal(signal.SIGTERM, _interrupt)
    if torch is None:
        monitor.notes.append(f"torch is not installed for {sys.executable}: nothing was instrumented")
    else:
        install(torch, monitor, tuning(torch, monitor, place) if spec.get("tune") else None)
        if cuda:
            for name in ("to", "cuda"):
                setattr(torch.Tensor, name, copy_hook(monitor, getattr(torch.Tensor, name)))
    # One live line on the terminal: the first rank's.
    live = spec.get("status", True) and (place is None or place["rank"] == 0)
    sampler = Sampler(monitor, status_stream() if live else None)
    sampler.start()
    code = run_script(spec["script"], spec.get("args", []))
    sampler.finish()
    tuner = monitor.tuner
    if tuner is not None:
        try:
            tuner.close()
        except Exception:
            pass
    result = measurements(monitor, sampler, code, cuda)
    result["rank"] = place
    out = spec["out"].replace("{rank}", str(place["rank"] if place else 0))
    tmp = out + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(result, fh)
    os.replace(tmp, out)
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)


def measurements(monitor: Monitor, sampler: Sampler, code: int | None, cuda: bool) -> dict[str, Any]:
    """What the report is built from (:func:`loadlint.monitor.report.build`)."""
    tuner = monitor.tuner
    return {
        "exit_code": code,
        "wall_s": round(monitor.clock(), 4),
        "started": monitor.wall_origin,
        "cuda": cuda,
        "loaders": [log.as_json() for log in monitor.logs],
        "sampling": sampler.as_json(),
        "copies": [[round(t, 6), n, pinned, round(took, 6), blocking] for t, n, pinned, took, blocking in monitor.copies],
        "tuning": tuner.as_json() if tuner is not None else None,
        "notes": monitor.notes + ([f"sampling failed {sampler.errors} times"] if sampler.errors else []),
    }


def rank_place() -> dict[str, int] | None:
    """The rank's place under ``torch.distributed.run`` (from the
    environment it sets), or None outside it."""
    try:
        world = int(os.environ["WORLD_SIZE"])
        place = {"rank": int(os.environ["RANK"]), "world_size": world,
                 "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
                 "local_world_size": int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))}
    except (KeyError, ValueError):
        return None
    return place if place["world_size"] > 1 else None


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def worker_cpus(usable: int, place: dict[str, int] | None) -> int:
    """The rank's share of the node's CPUs: its ranks' workers compete for
    the same CPUs, so each rank tunes within usable / local world size."""
    ranks = max(1, place["local_world_size"]) if place else 1
    return max(1, usable // ranks)


def tuning(torch: Any, monitor: Monitor, place: dict[str, int] | None = None) -> Any:
    """The hook that hands the tuner's iterator to the first loader iterated."""
    from loadlint.hardware.cpus import usable_here
    from loadlint.monitor.runners import eligible
    from loadlint.monitor.tuner import Tuner

    node = usable_here()
    usable = worker_cpus(node, place)
    if place is not None:
        monitor.notes.append(f"tuning within {usable} of the node's {node} usable CPUs "
                             f"({place['local_world_size']} ranks on the node)")
    refused: set[int] = set()

    def tune(loader: Any, log: LoaderLog) -> Any:
        if monitor.tuner is None and log.index not in refused:
            why = eligible(torch, loader)
            if why is not None:
                refused.add(log.index)
                monitor.notes.append(f"{os.path.relpath(log.file)}:{log.line}: {why}")
                return None
            monitor.tuner = Tuner(torch, monitor, loader, log, usable)
        if monitor.tuner is None or monitor.tuner.loader is not loader:
            return None
        return monitor.tuner.iterator()

    return tune


def run_script(path: str, args: list[str]) -> int:
    """Run the script as ``python`` would (verify's runner); returns its exit status."""
    try:
        main, code = script_main(path, args)
        exec(code, main.__dict__)
    except SystemExit as exc:
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code
        print(exc.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        _print(exc)
        return 130
    except BaseException as exc:  # the script's own error, printed as Python would
        _print(exc)
        return 1
    return 0


def _print(exc: BaseException) -> None:
    tb = exc.__traceback__
    while tb is not None and os.path.dirname(os.path.abspath(tb.tb_frame.f_code.co_filename)) in (HERE, CHILD_DIR):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)
