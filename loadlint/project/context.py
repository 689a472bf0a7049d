"""The walk's loaders and uses as a rule's project hook reads them
(``loadlint.rules.project_context``): typed views over the summaries'
JSON, with the places and chains of calls that messages quote.

Nothing is decided here: a view says what the walk found (a value, a
device's kind through the callers, the chain that reached a use); the
rule tests it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Sequence

from loadlint.engine.notebook import cell_of
from loadlint.engine.summaries import locate
from loadlint.project.flow import MISSING_VALUE, MODULE, Event, Frame, LoaderRef, SamplerRef, Value, resolve
from loadlint.project.flow import UNBOUND as NO_CALLER
from loadlint.project.modules import shown_path
from loadlint.rules.project_context import (
    ABSENT, UNBOUND, BuiltLoader, ImportedLoader, LightningClass, LoaderFlow, ModuleFlags, Setting, Step,
    TrainerRun, WouldIntroduce,
)
from loadlint.types import Flags, HardwareProfile, Location, UseKind

if TYPE_CHECKING:
    from loadlint.rules.project_context import Sampler, Use

NOTEBOOK = ".ipynb"
_PERCENT_CELL = re.compile(r"^# %%", re.MULTILINE)


class Locator:
    """Positions of summary-numbered nodes, one parse per file needed, and
    the places and chains of calls that messages quote."""

    def __init__(self, read_text: Callable[[str], str | None]) -> None:
        self.read_text = read_text
        self.files: dict[str, dict[int, tuple[Location, Location]]] = {}

    def span(self, path: str, ref: int) -> tuple[Location, Location] | None:
        if path not in self.files:
            text = self.read_text(path)
            self.files[path] = {} if text is None else locate(text, None)
        return self.files[path].get(ref)

    def place(self, path: str, ref: int) -> str:
        """``engine.py:40`` (relative to the current folder)."""
        span = self.span(path, ref)
        name = shown_path(path)
        if span and path.endswith(NOTEBOOK):
            cell, row = cell_of(self.read_text(path) or "", span[0].row)
            return f"{name}:cell {cell}:{row}"
        return f"{name}:{span[0].row}" if span else name

    def calls(self, frame: Frame) -> str:
        """``called from train.py:41`` for the chain of calls that entered ``frame``."""
        places = [
            self.place(f.parent.path, int(f.site.get("at", -1)))
            for f in reversed(frame.chain()) if f.parent is not None and f.site is not None
        ]
        return "called from " + ", from ".join(places) if places else ""

    def by(self, event: Event) -> str:
        """``by `engine.train_step` (engine.py:20) called from train.py:41``, or
        ``at module level (train.py:12)``."""
        frame = event.frame
        use = self.place(frame.path, int(event.use.get("at", -1)))
        if frame.function == MODULE:
            return f"at module level ({use})"
        calls = self.calls(frame)
        stem = Path(frame.path).stem
        return f"by `{stem}.{frame.function}` ({use})" + (f" {calls}" if calls else "")

    def notebook(self, path: str) -> bool:
        """A notebook, or a script in the percent format (``# %%`` cells),
        which Jupyter runs as one."""
        if path.endswith(NOTEBOOK):
            return True
        return _PERCENT_CELL.search(self.read_text(path) or "") is not None


def _device_string(value: str) -> str | None:
    head = value.split(":", 1)[0].strip().lower()
    if head in ("cuda", "cpu", "xla"):
        return head
    return "other" if head in ("mps", "xpu", "npu", "hpu") else None


def device_of(descriptor: Value, frame: Frame) -> str | None:
    """The kind of a transfer's device in ``frame`` ("cuda", "cpu", ...), None when unknown.

    A parameter takes the caller's value (or its default), through any
    number of calls: each frame's values were resolved when it was entered.
    """
    value = resolve(descriptor, frame, [], []) if isinstance(descriptor, dict) else descriptor
    if not isinstance(value, dict):
        return None
    if value.get("unbound"):
        return UNBOUND
    text = value.get("value")
    if isinstance(text, str):
        return _device_string(text)
    kind = value.get("device")
    return kind if isinstance(kind, str) else None


def setting(value: Value) -> Setting:
    """A walk's resolved value as a ``Setting``."""
    return ABSENT if value is MISSING_VALUE else Setting.of(value)


def flags_of(flags: Flags) -> ModuleFlags:
    methods = flags.get("start_methods")
    return ModuleFlags(bool(flags.get("cuda")), bool(flags.get("cuda_code")), bool(flags.get("set_epoch")),
                       bool(flags.get("frameworks")),
                       frozenset(m for m in methods if isinstance(m, str)) if isinstance(methods, list) else frozenset(),
                       bool(flags.get("unguarded_starts")))


def _paths(frame: Frame) -> frozenset[str]:
    return frozenset(f.path for f in frame.chain())


class UseView:
    """One event of the walk (``rules.project_context.Use``)."""

    def __init__(self, event: Event, ref: LoaderRef, where: Locator, reached: frozenset[str]) -> None:
        self.event = event
        self.ref = ref
        self.where = where
        self._reached = reached

    @property
    def kind(self) -> UseKind:
        return self.event.use["kind"]

    @property
    def path(self) -> str:
        return self.event.frame.path

    @property
    def at(self) -> int:
        return int(self.event.use.get("at", -1))

    @property
    def function(self) -> str:
        return self.event.frame.function

    @property
    def repeated(self) -> bool:
        return self.event.repeated

    @property
    def here(self) -> bool:
        return self.event.frame is self.ref.frame

    @property
    def guarded(self) -> bool:
        return bool(self.event.use.get("guarded"))

    @property
    def method(self) -> str | None:
        return self.event.use.get("method")

    @property
    def non_blocking(self) -> bool:
        return bool(self.event.use.get("non_blocking"))

    @property
    def plain(self) -> bool:
        return self.event.use.get("plain") is not False

    @property
    def device_param(self) -> str | None:
        device = self.event.use.get("device")
        if isinstance(device, dict) and "param" in device and "attribute" not in device:
            return device["param"]
        return None

    @property
    def device(self) -> str | None:
        return device_of(self.event.use.get("device"), self.event.frame)

    @cached_property
    def chain(self) -> Sequence[Step]:
        return tuple(
            Step(f.path, f.function, None if f.site is None else int(f.site.get("at", -1)),
                 f.site is not None and bool(f.site.get("guarded")))
            for f in self.event.frame.chain()
        )

    @property
    def reached(self) -> frozenset[str]:
        return self._reached | _paths(self.event.frame)

    @property
    def place(self) -> str:
        return self.where.place(self.path, self.at)

    @property
    def calls(self) -> str:
        return self.where.calls(self.event.frame)

    @property
    def by(self) -> str:
        return self.where.by(self.event)


class SamplerView:
    """A ``DistributedSampler`` a loader draws from (``rules.project_context.Sampler``)."""

    def __init__(self, sampler: SamplerRef, ref: LoaderRef) -> None:
        self.sampler = sampler
        self.ref = ref

    @property
    def path(self) -> str:
        return self.sampler.frame.path

    @property
    def at(self) -> int:
        return int(self.sampler.summary.get("at", -1))

    @property
    def shuffle(self) -> Setting:
        written = self.sampler.summary.get("shuffle")
        return ABSENT if written is None else setting(resolve(written, self.sampler.frame, [], []))

    @property
    def here(self) -> bool:
        return self.sampler.frame is self.ref.frame

    @property
    def callers(self) -> frozenset[str]:
        return _paths(self.sampler.frame)


class LoaderView:
    """One loader as one walk built it (``rules.project_context.LoaderFlow``)."""

    def __init__(self, ref: LoaderRef, where: Locator, reached: Callable[[Frame], frozenset[str]],
                 workers: str | None) -> None:
        self.ref = ref
        self.where = where
        self.reached = reached
        self.workers = workers

    @cached_property
    def built(self) -> BuiltLoader:
        return BuiltLoader.of(self.ref.frame.path, self.ref.summary)

    @property
    def place(self) -> str:
        return self.where.place(self.ref.frame.path, int(self.ref.summary.get("at", -1)))

    def setting(self, name: str) -> Setting:
        return setting(self.ref.setting(name))

    @property
    def sampler(self) -> Sampler | None:
        found = self.ref.setting("sampler")
        return SamplerView(found, self.ref) if isinstance(found, SamplerRef) else None

    @cached_property
    def uses(self) -> Sequence[Use]:
        return [UseView(event, self.ref, self.where, self.reached(event.frame.root)) for event in self.ref.events]

    @property
    def callers(self) -> frozenset[str]:
        return _paths(self.ref.frame)

    @property
    def dataset_in_memory(self) -> bool | None:
        found = self.ref.dataset()
        # UNBOUND: the walk started at the function, no caller to say.
        return None if found is MISSING_VALUE or found == NO_CALLER else isinstance(found, dict) and found.get("memory") is True


@dataclass
class Shared:
    """What every context of one project phase reads."""

    where: Locator
    flags: Callable[[str], Flags]
    mentions_in: Callable[[bytes], bool]
    profile_of: Callable[[str], HardwareProfile]
    mentioned: dict[bytes, bool] = field(default_factory=dict)


@dataclass
class View:
    """One call's ``rules.project_context.ProjectContext``."""

    shared: Shared
    loaders: Sequence[LoaderFlow] = ()
    imported: Sequence[ImportedLoader] = ()
    what_if: bool = False
    trainers: Callable[[Callable[[LightningClass], bool]], Iterator[TrainerRun]] | None = None
    introduced: Sequence[WouldIntroduce] = ()
    summarised: Sequence[str] = ()
    reported: frozenset[str] = frozenset()
    importers: Callable[[Sequence[str]], Mapping[str, str]] | None = None

    def module(self, path: str) -> ModuleFlags:
        return flags_of(self.shared.flags(path))

    def notebook(self, path: str) -> bool:
        return self.shared.where.notebook(path)

    def mentions(self, word: bytes) -> bool:
        found = self.shared.mentioned
        if word not in found:
            found[word] = self.shared.mentions_in(word)
        return found[word]

    def profile(self, path: str) -> HardwareProfile:
        return self.shared.profile_of(path)

    def place(self, path: str, at: int) -> str:
        return self.shared.where.place(path, at)

    def trainer_runs(self, wanted: Callable[[LightningClass], bool]) -> Iterator[TrainerRun]:
        return iter(()) if self.trainers is None else self.trainers(wanted)

    def importers_of(self, paths: Sequence[str]) -> Mapping[str, str]:
        return {} if self.importers is None else self.importers(paths)
