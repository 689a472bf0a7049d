"""Lightning across modules: a ``LightningDataModule`` (or a
``LightningModule`` with ``*_dataloader`` hooks) whose loaders are built in
one module, run by a GPU Trainer in another (``ProjectContext.trainer_runs``).

The module that builds ``Trainer(accelerator="gpu")`` and hands it an
instance of the class (``trainer.fit(model, datamodule=dm)``) is found from
the class, or from a module-level function that returns one (up to
``MAX_FACTORIES`` such functions deep): only a name bound once to the
Trainer, and to the instance, counts.  Only the classes a rule wants are
searched for (a byte search of the project per round).
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

from loadlint.project.modules import ModuleResolver
from loadlint.rules.project_context import BuiltLoader, LightningClass, TrainerRun
from loadlint.types import FunctionSummary, LoaderSummary, Summary

#: Lightning's loader hooks, which its Trainer calls and iterates.
HOOKS = ("train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader")
#: The hooks each Trainer method calls.
RUN_HOOKS = {
    "fit": ("train_dataloader", "val_dataloader"),
    "validate": ("val_dataloader",),
    "test": ("test_dataloader",),
    "predict": ("predict_dataloader",),
}
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


def trainer_runs(
    summaries: dict[str, Summary],
    summary_of: Callable[[str], Summary | None],
    importers: Callable[[dict[str, set[str]]], Iterable[str]],
    resolver: ModuleResolver,
    keep: Callable[[LightningClass], bool],
) -> Iterator[TrainerRun]:
    """The runs of GPU Trainers in one module handed an instance of a
    Lightning class of another that ``keep`` keeps."""
    makers: dict[Maker, Maker] = {}
    for path, summary in summaries.items():
        for cls in summary.get("lightning_classes", []):
            if keep(LightningClass(path, cls, _built(path, hook_loaders(summary, cls)))):
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
                        yield from _runs(path, run["at"], run["accelerator"], run["method"], maker, makers[maker], summaries)
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


def _built(path: str, loaders: list[LoaderSummary]) -> list[BuiltLoader]:
    return [BuiltLoader.of(path, loader) for loader in loaders]


def _runs(
    path: str, at: int, accelerator: str, method: str, maker: Maker, cls: Maker, summaries: dict[str, Summary]
) -> Iterator[TrainerRun]:
    summary = summaries.get(cls[0])
    if summary is None or cls[0] == path:
        return
    made = LightningClass(cls[0], cls[1], _built(cls[0], hook_loaders(summary, cls[1])))
    loaders = _built(cls[0], hook_loaders(summary, cls[1], RUN_HOOKS.get(method, ())))
    yield TrainerRun(path, at, accelerator, method, made, maker[1] if maker != cls else None, loaders)
