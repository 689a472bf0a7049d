"""LL202 across modules for Lightning: a ``LightningDataModule`` (or a
``LightningModule`` with ``*_dataloader`` hooks) whose loaders are built in
one module, fitted by a GPU Trainer in another.

The class's module shows no GPU (its own LL202 is silent); the module that
builds ``Trainer(accelerator="gpu")`` and hands it an instance of the class
(``trainer.fit(model, datamodule=dm)``) does.  The instance is followed from
the class, or from a module-level function that returns one (up to
``MAX_FACTORIES`` such functions deep), to the runs of that Trainer: only
a name bound once to the Trainer, and to the instance, counts.
"""

from __future__ import annotations

from typing import Callable, Iterable

from loadlint.project.modules import ModuleResolver
from loadlint.project.reporter import Reporter
from loadlint.types import Flags, FunctionSummary, LoaderSummary, Summary

#: Lightning's loader hooks, which its Trainer calls and iterates.
HOOKS = ("train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader")
#: The hooks each Trainer method calls.
RUN_HOOKS = {
    "fit": ("train_dataloader", "val_dataloader"),
    "validate": ("val_dataloader",),
    "test": ("test_dataloader",),
    "predict": ("predict_dataloader",),
}
#: The codes this pass reports: a run selecting none of them skips it.
CODES = frozenset({"LL202"})
#: Factories followed from the class to the Trainer's module, at most.
MAX_FACTORIES = 3
MODULE = "<module>"

#: (module, name) of a class or of a function returning an instance of it.
Maker = tuple[str, str]


def hook_loaders(summary: Summary, cls: str, hooks: tuple[str, ...] = HOOKS) -> list[LoaderSummary]:
    """The loaders the class's hooks return (built in the hook)."""
    out = []
    for hook in hooks:
        fn = summary.get("functions", {}).get(f"{cls}.{hook}")
        returns = fn.get("returns") if fn else None
        if fn is None or returns is None or returns.get("tuple"):
            continue
        for value in returns.get("values", []):
            index = value.get("loader")
            if isinstance(index, int) and 0 <= index < len(fn.get("loaders", [])):
                out.append(fn["loaders"][index])
    return out


def gpu_trainers(
    summaries: dict[str, Summary],
    summary_of: Callable[[str], Summary | None],
    importers: Callable[[dict[str, set[str]]], Iterable[str]],
    resolver: ModuleResolver,
    flags: Callable[[str], Flags],
    report: Reporter,
) -> None:
    """Report LL202 on the hook loaders of Lightning classes that a GPU
    Trainer in another module is handed."""
    makers: dict[Maker, Maker] = {}
    for path, summary in summaries.items():
        own = flags(path)
        if own.get("cuda") or own.get("cuda_code"):
            continue  # the file's own LL202 sees its GPU (or its Dataset may return CUDA tensors)
        for cls in summary.get("lightning_classes", []):
            if any(_unpinned(loader) for loader in hook_loaders(summary, cls)):
                makers[(path, cls)] = (path, cls)
    searched: set[Maker] = set()
    for _ in range(MAX_FACTORIES + 1):
        new = {maker: cls for maker, cls in makers.items() if maker not in searched}
        if not new:
            break
        searched.update(new)
        wanted: dict[str, set[str]] = {}
        for path, name in new:
            wanted.setdefault(path, set()).add(name)
        for path in sorted(set(importers(wanted)) | set(wanted)):
            module = summary_of(path)
            if module is None:
                continue

            def made(callee: str, importer: str = path) -> Maker | None:
                found = (importer, callee[1:]) if callee.startswith(":") else resolver.module_file(importer, callee)
                return found if found is not None and found in makers and "." not in found[1] else None

            for run in module.get("gpu_runs", []):
                for callee in run.get("handed", []):
                    maker = made(callee)
                    if maker is not None:
                        _report(path, run["at"], run["accelerator"], run["method"], maker, makers[maker], summaries, report)
            for name, fn in module.get("functions", {}).items():
                maker = _returned_maker(fn, made) if name != MODULE and "." not in name else None
                if maker is not None and (path, name) not in makers:
                    makers[(path, name)] = makers[maker]


def _returned_maker(fn: FunctionSummary, made: Callable[[str], Maker | None]) -> Maker | None:
    """What a function returns an instance of: ``return MNISTDataModule(...)``."""
    returns = fn.get("returns")
    if not returns or returns.get("tuple") or not returns.get("values"):
        return None
    value = returns["values"][0]
    index = value.get("call")
    calls = fn.get("calls", [])
    if not isinstance(index, int) or value.get("index") is not None or not 0 <= index < len(calls):
        return None
    return made(calls[index]["callee"])


def _unpinned(loader: LoaderSummary) -> str | None:
    values = loader.get("values", {})
    if "pin_memory" not in values:
        return "`pin_memory` is not set"
    return "`pin_memory=False`" if values["pin_memory"].get("value") is False else None


def _report(
    path: str, at: int, accelerator: str, method: str, maker: Maker, cls: Maker, summaries: dict[str, Summary],
    report: Reporter,
) -> None:
    summary = summaries.get(cls[0])
    if summary is None or cls[0] == path:
        return
    via = f", made by `{maker[1]}`," if maker != cls else ""
    for loader in hook_loaders(summary, cls[1], RUN_HOOKS.get(method, ())):
        what = _unpinned(loader)
        if what is None:
            continue
        message = (
            f"{what} but batches go to the GPU: copies from pageable memory block and cannot overlap compute; "
            f"set `pin_memory=True` (`{cls[1]}`{via} is handed to `trainer.{method}` of a Lightning "
            f"`Trainer(accelerator=\"{accelerator}\")` at {report.place(path, at)}, which moves its batches to the GPU)"
        )
        ref = int(loader.get("at", -1))
        change = None if "pin_memory" in loader.get("kw", {}) else (ref, {"pin_memory": "True"}, "safe", "Set `pin_memory=True`")
        report.add(cls[0], "LL202", ref, message, change)
