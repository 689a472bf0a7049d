"""Monitoring from code that owns its loop: ``watch(loader)``, and
callbacks for Lightning and Hugging Face's ``Trainer``.  All three fill the
same measurements as ``loadlint monitor`` and give the same report.

``watch(loader)`` returns a view of the loader whose iterators are timed;
``report()`` builds the report (``write(path)`` writes its JSON).  The
callbacks time the steps from the trainer's hooks: the data wait of a step
is the time from the end of the previous step to the start of this one
(the trainer fetches the batch in between).  Lightning and transformers are
imported only when their callback is asked for.
"""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path
from typing import Any

from loadlint.monitor.child import measurements
from loadlint.monitor.instrument import LoaderLog, Monitor
from loadlint.monitor.report import as_json, as_text, build
from loadlint.monitor.sampling import Sampler


HERE = os.path.dirname(os.path.abspath(__file__))


class Recorder:
    """One process's monitor and its sampling thread."""

    def __init__(self) -> None:
        self.monitor = Monitor()
        self.sampler = Sampler(self.monitor)
        self.sampler.start()

    def report(self) -> dict[str, Any]:
        raw = measurements(self.monitor, self.sampler, None, False)
        from loadlint.hardware.cpus import usable_here

        raw["machine"] = {"usable_cpus": usable_here(), "gpu_count": len(self.sampler.nvml.handles)}
        return build(raw, [sys.executable, *sys.argv])


_RECORDER: list[Recorder] = []


def recorder() -> Recorder:
    if not _RECORDER:
        _RECORDER.append(Recorder())
    return _RECORDER[0]


def loader_site(path: str | None, fallback: tuple[str, int, int]) -> tuple[str, int, int]:
    """The file's only ``...Loader(...)`` call, when it has exactly one;
    else where ``watch`` was called."""
    if not path or not os.path.isfile(path):
        return fallback
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return fallback
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name == "DataLoader":
                calls.append(node)
    if len(calls) != 1:
        return fallback
    return os.path.abspath(path), calls[0].lineno, calls[0].end_lineno or calls[0].lineno


class WatchedLoader:
    """The loader, iterated through the monitor's timing."""

    def __init__(self, loader: Any, log: LoaderLog, owner: Recorder) -> None:
        self._loader = loader
        self._log = log
        self._recorder = owner

    def __iter__(self) -> Any:
        return self._recorder.monitor.watch_iterator(self._log, iter(self._loader))

    def __len__(self) -> int:
        return len(self._loader)

    def __getattr__(self, name: str) -> Any:
        if name == "_loader":  # a copy being built
            raise AttributeError(name)
        return getattr(self._loader, name)

    def report(self) -> dict[str, Any]:
        return as_json(self._recorder.report())

    def text(self) -> str:
        return as_text(self._recorder.report())

    def write(self, path: str) -> None:
        Path(path).write_text(json.dumps(self.report(), indent=2) + "\n")


def watch(loader: Any) -> Any:
    """Time every pass over ``loader``; returns a view to iterate instead of
    it.  Under ``loadlint monitor`` the loader is watched already and comes
    back as it is."""
    if "_loadlint_log" in getattr(loader, "__dict__", {}):
        return loader
    owner = recorder()
    caller = sys._getframe(1)
    while caller.f_back is not None and os.path.dirname(os.path.abspath(caller.f_code.co_filename)) == HERE:
        caller = caller.f_back  # loadlint.monitor.watch, the package's re-export
    here = (os.path.abspath(caller.f_code.co_filename), caller.f_lineno, caller.f_lineno)
    log = owner.monitor.register(loader, loader_site(here[0], here))
    return WatchedLoader(loader, log, owner)


class HookClock:
    """Steps from a trainer's hooks (the batch is fetched between them)."""

    def __init__(self, loader: Any = None, script: str | None = None) -> None:
        self.recorder = recorder()
        main = script or getattr(sys.modules.get("__main__"), "__file__", None)
        site = loader_site(main, (os.path.abspath(main) if main else "<trainer>", 0, 0))
        self.log = self.recorder.monitor.register(loader, site) if loader is not None else None
        self._site = site
        self._last_end: float | None = None

    def _log_for(self, loader: Any) -> LoaderLog | None:
        if loader is not None and "_loadlint_log" in getattr(loader, "__dict__", {}):
            return None  # loadlint monitor times this loader's own iterator
        if self.log is None:
            self.log = self.recorder.monitor.register(loader if loader is not None else _Unknown(), self._site)
        return self.log

    def epoch_start(self, loader: Any = None) -> None:
        log = self._log_for(loader)
        if log is not None:
            log.new_pass("trainer hooks")
            self._last_end = self.recorder.monitor.clock()

    def step_start(self, loader: Any = None) -> None:
        log = self._log_for(loader)
        if log is None:
            return
        now = self.recorder.monitor.clock()
        began = self._last_end if self._last_end is not None else now
        log.called(began)
        log.got(began, now - began)

    def step_end(self) -> None:
        self._last_end = self.recorder.monitor.clock()

    def epoch_end(self) -> None:
        if self.log is not None and self._last_end is not None:
            self.log.called(self._last_end)

    def report(self) -> dict[str, Any]:
        return as_json(self.recorder.report())


class _Unknown:
    """Stands for a loader the trainer did not show."""

    batch_size = None
    dataset = None


def _train_loader(trainer: Any) -> Any:
    loader = getattr(trainer, "train_dataloader", None)
    return None if callable(loader) else loader


def make_lightning_callback(base: type) -> type:
    class LoadlintMonitor(base):  # type: ignore[misc]
        """Lightning ``Callback``: times each training step's data wait."""

        def __init__(self) -> None:
            super().__init__()
            self.clock = HookClock()

        def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
            self.clock.epoch_start(_train_loader(trainer))

        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
            self.clock.step_start(_train_loader(trainer))

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
            self.clock.step_end()

        def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            self.clock.epoch_end()

        def report(self) -> dict[str, Any]:
            return self.clock.report()

    return LoadlintMonitor


def make_hf_callback(base: type) -> type:
    class LoadlintMonitor(base):  # type: ignore[misc]
        """Hugging Face ``TrainerCallback``: times each training step's data wait."""

        def __init__(self) -> None:
            super().__init__()
            self.clock = HookClock()

        def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.clock.epoch_start(kwargs.get("train_dataloader"))

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.clock.step_start(kwargs.get("train_dataloader"))

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.clock.step_end()

        def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.clock.epoch_end()

        def report(self) -> dict[str, Any]:
            return self.clock.report()

    return LoadlintMonitor


def lightning_callback() -> Any:
    """A Lightning ``Callback`` instance (``Trainer(callbacks=[...])``)."""
    try:
        from lightning.pytorch import Callback  # type: ignore[import-not-found]
    except ImportError:
        try:
            from pytorch_lightning import Callback  # type: ignore[import-not-found]
        except ImportError:
            raise ImportError("the Lightning callback needs lightning (pip install lightning)") from None
    return make_lightning_callback(Callback)()


def hf_callback() -> Any:
    """A Hugging Face ``TrainerCallback`` instance (``Trainer(callbacks=[...])``)."""
    try:
        from transformers import TrainerCallback  # type: ignore[import-not-found]
    except ImportError:
        raise ImportError("the Hugging Face callback needs transformers (pip install transformers)") from None
    return make_hf_callback(TrainerCallback)()
