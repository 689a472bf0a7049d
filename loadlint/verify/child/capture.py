"""Capture: patch ``DataLoader.__init__``, run the user's code and record
every loader it builds with its call site and tunable configuration."""

from __future__ import annotations

import builtins
import os
import sys
import traceback
import types
from typing import Any

from loadlint.facts.signature import TUNABLE_DEFAULTS
from loadlint.verify.child.state import State, StopScript

#: Frames in this package are verify's own, never the user's call site.
CHILD_DIR = os.path.dirname(os.path.abspath(__file__))
#: The verify package: frames under it are not the user's code.
VERIFY_DIR = os.path.dirname(CHILD_DIR)


def _is_torch_data_file(filename: str) -> bool:
    return os.sep + os.path.join("torch", "utils", "data") + os.sep in filename


def call_site(obj: Any) -> tuple[str, int, int]:
    """File and line span of the expression that built ``obj``: the first
    frame outside torch's data package and outside the ``__init__`` chain
    of ``obj`` itself (subclasses calling ``super().__init__``)."""
    f = sys._getframe(2)
    while f is not None:
        code = f.f_code
        if _is_torch_data_file(code.co_filename) or os.path.dirname(code.co_filename) == CHILD_DIR:
            f = f.f_back
            continue
        if code.co_name == "__init__" and code.co_argcount:
            if f.f_locals.get(code.co_varnames[0]) is obj:
                f = f.f_back
                continue
        break
    if f is None:
        return "<unknown>", 0, 0
    line = end = f.f_lineno
    try:
        pos = list(f.f_code.co_positions())[f.f_lasti // 2]
        if pos[0] is not None:
            line, end = pos[0], pos[1] or pos[0]
    except (AttributeError, IndexError):
        pass
    return os.path.abspath(f.f_code.co_filename), line, end


def describe(value: Any) -> Any:
    """A JSON-able rendering of an argument for reports."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    try:
        import multiprocessing.context as mpc

        if isinstance(value, mpc.BaseContext):
            return value.get_start_method()
    except Exception:
        pass
    name = getattr(type(value), "__qualname__", type(value).__name__)
    if callable(value) and hasattr(value, "__qualname__"):
        return f"<{value.__qualname__}>"
    try:
        n = len(value)
        return f"<{name} of {n}>"
    except Exception:
        return f"<{name}>"


def tunable_of(bound: dict[str, Any]) -> dict[str, Any]:
    """The tunable keywords of a bound DataLoader call, rendered."""
    return {key: describe(bound.get(key, default)) for key, default in TUNABLE_DEFAULTS.items()}


def matches_target(state: State, rec: dict[str, Any]) -> bool:
    """Whether a recorded construction is the loader the parent asked for."""
    tgt = state.spec.get("target") or {}
    at = tgt.get("at")
    if at:
        try:
            same = os.path.samefile(rec["file"], at["file"])
        except OSError:
            same = os.path.abspath(rec["file"]) == os.path.abspath(at["file"])
        return same and rec["line"] <= at["line"] <= max(rec["end_line"], rec["line"])
    sites = tgt.get("finding_sites")
    if sites:
        rows = sites.get(os.path.abspath(rec["file"]), ())
        return any(rec["line"] <= r <= rec["end_line"] for r in rows)
    return True


def install_capture(torch: Any, state: State) -> None:
    """Record every DataLoader construction into ``state``."""
    import inspect

    DataLoader = torch.utils.data.DataLoader
    original = DataLoader.__init__
    signature = inspect.signature(original)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        depth = getattr(state.depth, "n", 0)
        if depth or state.target_instance is not None and state.spec["mode"] == "bench":
            return original(self, *args, **kwargs)
        override = state.spec.get("insitu", {}).get("config")
        site = call_site(self)
        state.depth.n = depth + 1
        try:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            arguments.pop(next(iter(signature.parameters)))
            rec = {
                "index": len(state.records),
                "file": site[0], "line": site[1], "end_line": site[2],
                "class": f"{type(self).__module__}.{type(self).__qualname__}",
                "explicit": sorted(kwargs) + [f"<positional {len(args)}>"] * bool(args),
                "config": tunable_of(arguments),
            }
            is_target = state.target is None and matches_target(state, rec)
            if is_target and override is not None:
                arguments.update(config_to_kwargs(override, arguments))
                original(self, **arguments)
            else:
                original(self, *args, **kwargs)
        finally:
            state.depth.n = depth
        try:
            rec["len"] = len(self)
        except Exception:
            rec["len"] = None
        rec["iterable"] = isinstance(self.dataset, torch.utils.data.IterableDataset)
        rec["dataset"] = describe(self.dataset)
        rec["batch_size"] = self.batch_size
        state.records.append(rec)
        state.objects.append(arguments)
        if is_target:
            state.target = rec["index"]
            state.target_instance = self
            state.progress("captured", file=rec["file"], line=rec["line"])
            if state.stop_on_capture:
                state.stopped = True
                raise StopScript()

    DataLoader.__init__ = __init__
    state.original_init = original


def uninstall_capture(torch: Any, state: State) -> None:
    """Put DataLoader's own ``__init__`` back (the candidates are built plain)."""
    if state.original_init is not None:
        torch.utils.data.DataLoader.__init__ = state.original_init


def config_to_kwargs(config: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """Tunable values for DataLoader, keeping the user's own context object
    when the start method it names is unchanged."""
    out = {}
    for key in TUNABLE_DEFAULTS:
        if key not in config:
            continue
        value = config[key]
        if key == "multiprocessing_context" and isinstance(value, str):
            mine = arguments.get(key)
            if describe(mine) == value:
                value = mine
        out[key] = value
    if not out.get("num_workers", arguments.get("num_workers", 0)):
        # Keywords DataLoader rejects or asserts on without workers.
        out.update(prefetch_factor=None, persistent_workers=False,
                   multiprocessing_context=None, timeout=0)
    return out


def run_user_code(state: State, spec: dict[str, Any]) -> dict[str, Any]:
    """Run the script (as ``python script.py`` would) or call the entry.

    Returns the outcome: ``captured`` / ``finished`` / ``crashed`` /
    ``exited`` with details for the one-line message the parent prints.
    """
    entry = spec.get("entry")
    try:
        if entry:
            return _run_entry(state, entry)
        _run_script(spec["script"], spec.get("args", []))
        return {"outcome": "finished"}
    except StopScript:
        return {"outcome": "captured"}
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if state.target is not None:
            return {"outcome": "captured"}
        return {"outcome": "exited", "code": code,
                "message": "" if isinstance(exc.code, int) or exc.code is None else str(exc.code)}
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the user's code may raise anything
        return {"outcome": "crashed", "type": type(exc).__name__,
                "message": str(exc).splitlines()[0][:300] if str(exc) else "",
                "where": _user_frame(exc, spec)}


def _user_frame(exc: BaseException, spec: dict[str, Any]) -> str | None:
    import sysconfig

    frames = traceback.extract_tb(exc.__traceback__)
    script = os.path.abspath(spec["script"]) if spec.get("script") else None
    libs = {os.path.abspath(p) for k, p in sysconfig.get_paths().items()
            if k in ("stdlib", "platstdlib", "purelib", "platlib")}
    best = None
    for fr in frames:
        fn = os.path.abspath(fr.filename)
        if fn == script:
            best = fr
        elif (not fn.startswith(VERIFY_DIR) and not fr.filename.startswith("<")
              and not any(fn.startswith(lib + os.sep) for lib in libs)):
            best = fr
    if best is None:
        return None
    return f"{os.path.relpath(best.filename, spec.get('cwd') or os.getcwd())}:{best.lineno}"


def script_main(path: str, args: list[str]) -> tuple[types.ModuleType, Any]:
    """coverage.py's exec runner, reduced: a fresh ``__main__`` that stays
    in ``sys.modules`` so that spawn/forkserver workers find the script's
    classes by re-running it as ``__mp_main__``; returns it and the
    script's compiled code (``monitor`` runs the same way)."""
    path = os.path.abspath(path)
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__builtins__ = builtins
    main.__spec__ = None
    main.__package__ = None
    main.__loader__ = None
    sys.modules["__main__"] = main
    sys.argv = [path, *args]
    sys.path[0] = os.path.dirname(path)
    with open(path, "rb") as fh:
        source = fh.read()
    return main, compile(source, path, "exec", dont_inherit=True)


def _run_script(path: str, args: list[str]) -> None:
    main, code = script_main(path, args)
    exec(code, main.__dict__)


def _run_entry(state: State, entry: str) -> dict[str, Any]:
    import importlib

    import torch

    module_name, _, func_name = entry.partition(":")
    sys.path[0] = os.getcwd()
    state.stop_on_capture = False
    module = importlib.import_module(module_name)
    value = getattr(module, func_name)()
    if isinstance(value, torch.utils.data.DataLoader):
        for i, rec in enumerate(state.records):
            if state.target is None and state.objects[i].get("dataset") is value.dataset:
                state.target = i
        if state.target is None:
            return {"outcome": "crashed", "type": "TypeError",
                    "message": f"{entry} returned a DataLoader built before the shim was active",
                    "where": None}
        return {"outcome": "captured"}
    if isinstance(value, torch.utils.data.Dataset):
        state.target = None
        state.spec.setdefault("target", {})["at"] = None
        state.stop_on_capture = False
        holder = torch.utils.data.DataLoader(value)  # recorded by the patch
        del holder
        rec = state.records[-1]
        code = getattr(module, func_name).__code__
        rec.update(file=os.path.abspath(code.co_filename), line=code.co_firstlineno,
                   end_line=code.co_firstlineno, synthetic=True)
        state.target = rec["index"]
        state.notes.append(f"{entry} returned a Dataset: measured from DataLoader(dataset) defaults")
        return {"outcome": "captured"}
    return {"outcome": "crashed", "type": "TypeError",
            "message": f"{entry} returned {type(value).__name__}, not a Dataset or DataLoader",
            "where": None}
