"""What a rule's cross-file half reads: the project analysis's joins, typed.

``loadlint.project`` joins the modules' summaries (``loadlint.facts.summary``):
it follows each loader along the calls between modules (the walk), finds the
dataset classes other modules define and the Lightning Trainers that run a
class of another module.  It hands every rule that defines
``Rule.check_project`` a ``ProjectContext`` of what it joined, and turns the
``ProjectReport``s the hook yields into findings where the user edits (the
file's own findings and ``noqa`` comments honoured).  The project decides
nothing about a rule: the verdict and the message are the rule's.

Nothing here imports libcst: a run served from the cache never needs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence

from loadlint.types import HardwareProfile, LoaderSummary, Scalar, UseKind

#: ``Use.device`` for a parameter no caller on the walk's path gave a value
#: (a function walked on its own): the walks from its callers decide.
UNBOUND = "unbound"


@dataclass(frozen=True)
class Setting:
    """A loader argument: absent (torch's default), a literal, or a value the
    summary cannot name (``known`` False)."""

    written: bool
    known: bool = False
    value: Scalar = None
    #: ``os.cpu_count()``.
    cpu_count: bool = False
    #: Where the value comes from (``config.WORKERS``), when another module gave it.
    note: str | None = None

    @classmethod
    def of(cls, described: Any) -> Setting:
        """The setting a summary's descriptor (or a walk's resolved value) says."""
        if not isinstance(described, dict):
            return cls(True)
        note = described.get("note")
        return cls(True, "value" in described, described.get("value"), bool(described.get("cpu_count")),
                   note if isinstance(note, str) else None)

    def is_(self, value: Scalar) -> bool:
        """Written as exactly ``value`` (``True``, ``False``, ``"fork"``)."""
        return self.known and self.value is value


#: The argument is not written: torch's default applies.
ABSENT = Setting(False)


@dataclass(frozen=True)
class BuiltLoader:
    """One ``DataLoader(...)`` as its function writes it (parameters unresolved)."""

    path: str
    #: The summary's number of the call node: where a finding on the loader goes.
    at: int
    settings: Mapping[str, Setting]
    #: Keywords passed one of the function's parameters as is (the caller's to choose).
    passed: Mapping[str, str]

    @classmethod
    def of(cls, path: str, loader: LoaderSummary) -> BuiltLoader:
        values = loader.get("values", {})
        return cls(path, int(loader.get("at", -1)), {k: Setting.of(v) for k, v in values.items()},
                   dict(loader.get("kw", {})))

    def setting(self, name: str) -> Setting:
        return self.settings.get(name, ABSENT)


@dataclass(frozen=True)
class Step:
    """One function on a use's chain of calls, the outermost first."""

    path: str
    #: ``"<module>"`` for a module body.
    function: str
    #: The call that entered it (a summary node number), and whether that
    #: call is under ``if __name__ == "__main__":``; None for the first.
    site: int | None
    site_guarded: bool


@dataclass(frozen=True)
class ModuleFlags:
    """What a module's own rules see (``Summary.flags``)."""

    #: CUDA evidence, as LL202 reads a module.
    cuda: bool
    #: Code that touches CUDA (a Dataset may return CUDA tensors).
    cuda_code: bool
    set_epoch: bool
    #: A framework drives the loop (Lightning, accelerate).
    frameworks: bool
    #: The methods passed to ``set_start_method``.
    start_methods: frozenset[str]
    #: Module-level code that starts worker processes outside a main guard.
    unguarded_starts: bool = False


class Use(Protocol):
    """Something a function does with a loader it was given or built: one
    event of the walk, in the frame it happened in."""

    @property
    def kind(self) -> UseKind: ...
    @property
    def path(self) -> str: ...
    #: The summary's number of the node (the loop's iterable, the call).
    @property
    def at(self) -> int: ...
    @property
    def function(self) -> str: ...
    #: Once per pass of an enclosing loop (its own or a caller's).
    @property
    def repeated(self) -> bool: ...
    #: In the function (frame) that built the loader: the file's own rules see it.
    @property
    def here(self) -> bool: ...
    @property
    def guarded(self) -> bool: ...
    #: A transfer's method (``to``, ``cuda``, ``type``, ``pin_memory``), else None.
    @property
    def method(self) -> str | None: ...
    @property
    def non_blocking(self) -> bool: ...
    #: A copy whose ``non_blocking`` can be added (``facts.iteration.plain_copy``).
    @property
    def plain(self) -> bool: ...
    #: The function's parameter a ``.to`` destination is, as is (``.to(device)``).
    @property
    def device_param(self) -> str | None: ...
    #: The destination's kind through the callers' values (``"cuda"``,
    #: ``"cpu"``, ``"xla"``, ``"other"``, ``"accelerator"``), ``UNBOUND``, or None.
    @property
    def device(self) -> str | None: ...
    #: The chain of calls that reached the use, the outermost first.
    @property
    def chain(self) -> Sequence[Step]: ...
    #: The modules the walk that made the use entered, and those on its chain.
    @property
    def reached(self) -> frozenset[str]: ...
    #: ``train.py:12``.
    @property
    def place(self) -> str: ...
    #: ``called from train.py:41, from ...``, or "" for a function the walk started at.
    @property
    def calls(self) -> str: ...
    #: ``by `engine.step` (engine.py:20) called from train.py:41`` or
    #: ``at module level (train.py:12)``.
    @property
    def by(self) -> str: ...


class Sampler(Protocol):
    """A ``DistributedSampler(...)`` a loader draws from."""

    @property
    def path(self) -> str: ...
    @property
    def at(self) -> int: ...
    #: Its ``shuffle`` where it is built (absent: the default, True).
    @property
    def shuffle(self) -> Setting: ...
    #: Built in the function that builds the loader.
    @property
    def here(self) -> bool: ...
    #: The modules on the chain of calls that built it.
    @property
    def callers(self) -> frozenset[str]: ...


class LoaderFlow(Protocol):
    """One loader as one walk built it, with what was done with it."""

    @property
    def built(self) -> BuiltLoader: ...
    #: ``train.py:12``: where it is built.
    @property
    def place(self) -> str: ...
    #: An argument's value in the frame that built it, the callers' values bound.
    def setting(self, name: str) -> Setting: ...
    #: The worker count as a message shows it (``4``, ```os.cpu_count()```)
    #: when certainly positive; in ``ProjectContext.what_if``, ``"the fix's"``.
    @property
    def workers(self) -> str | None: ...
    @property
    def sampler(self) -> Sampler | None: ...
    @property
    def uses(self) -> Sequence[Use]: ...
    #: The modules on the chain of calls that built it.
    @property
    def callers(self) -> frozenset[str]: ...
    #: For a dataset that is the function's parameter, whether this walk's
    #: caller passed a dataset held in memory (a ``TensorDataset``); None
    #: when the dataset is no parameter.
    @property
    def dataset_in_memory(self) -> bool | None: ...


@dataclass(frozen=True)
class HandleClass:
    """A dataset class whose ``__init__`` keeps a handle that cannot be pickled
    (``Summary.handle_classes``)."""

    cls: str
    attr: str
    what: str
    written: str
    error: str


@dataclass(frozen=True)
class ImportedLoader:
    """A loader of one of the run's files whose dataset class is defined in
    another project module."""

    path: str
    at: int
    #: Its worker count when known; a count at least 1 for every input but
    #: no known number, as written (``LOADER_WORKERS``); None otherwise.
    workers: int | str | None
    #: Its ``multiprocessing_context`` as written: a string, ``"?"`` (not a
    #: string), or None (absent, or None).
    context: str | None
    #: The loader's module's ``set_start_method`` methods.
    start_methods: frozenset[str]
    #: The module that defines the class, and what the class keeps.
    module: str
    handle: HandleClass | None
    #: The dataset is no loading pipeline: the class holds its data in
    #: memory (the test a class of the loader's own module passes,
    #: ``facts.datasets.in_memory_class``), or the module's functions build
    #: the loader's pre-tokenized rows or padding collate (``module`` then
    #: names one of them, ``handle`` is None).
    in_memory: bool = False


@dataclass(frozen=True)
class LightningClass:
    """A ``LightningDataModule`` (or ``LightningModule`` with loader hooks)."""

    path: str
    name: str
    #: The loaders its ``*_dataloader`` hooks build and return.
    loaders: Sequence[BuiltLoader]


@dataclass(frozen=True)
class TrainerRun:
    """``trainer.<method>(...)`` of a Lightning Trainer on the GPU, in one
    module, handed an instance of a class of another module."""

    path: str
    at: int
    accelerator: str
    method: str
    cls: LightningClass
    #: The function that made the instance, when not the class itself.
    maker: str | None
    #: The loaders of the hooks this method runs.
    loaders: Sequence[BuiltLoader]


@dataclass(frozen=True)
class WouldIntroduce:
    """A loader without workers, and the first finding its file's fix adding
    workers would make the project report (``ProjectContext.what_if``)."""

    #: The loader: where the fix adding workers would go.
    path: str
    at: int
    #: The finding: its rule, place (``engine.py:20``) and message.
    code: str
    name: str
    place: str
    message: str


class ProjectContext(Protocol):
    """What the project analysis joined, for one call of a rule's hook.

    The hook may be called several times in one run, each time with a part
    of the project (one walk's loader, then the rest): it reports what it
    finds in what it is given."""

    #: The loaders followed across functions and modules.
    @property
    def loaders(self) -> Sequence[LoaderFlow]: ...
    #: Loaders of the run's files whose dataset class another module defines.
    @property
    def imported(self) -> Sequence[ImportedLoader]: ...
    #: Set while the project asks what a file's fix adding workers (LL201)
    #: would introduce: ``loaders`` are those without workers, with the
    #: fix's; what a rule reports then withholds that fix.
    @property
    def what_if(self) -> bool: ...
    def module(self, path: str) -> ModuleFlags: ...
    #: A notebook, or a script in the percent format (``# %%`` cells).
    def notebook(self, path: str) -> bool: ...
    #: What the fixes adding workers would introduce, by loader (for
    #: ``Rule.revise_own``, once the hooks have been asked).
    @property
    def introduced(self) -> Sequence[WouldIntroduce]: ...
    #: The project modules the phase has summaries of (for ``Rule.revise_own``).
    @property
    def summarised(self) -> Sequence[str]: ...
    #: The files where this rule's own hook reported (for ``Rule.revise_own``).
    @property
    def reported(self) -> frozenset[str]: ...
    #: Whether any project file contains ``word`` (a byte search).
    def mentions(self, word: bytes) -> bool: ...
    #: For each module of ``paths`` that another project module imports,
    #: the first such importer (a notebook is never imported).
    def importers_of(self, paths: Sequence[str]) -> Mapping[str, str]: ...
    #: The target's profile for a file (detected on first read).
    def profile(self, path: str) -> HardwareProfile: ...
    #: ``train.py:12`` for a summary-numbered node.
    def place(self, path: str, at: int) -> str: ...
    #: The GPU Trainer runs handed a class ``wanted`` keeps (only those
    #: classes' makers are searched for).
    def trainer_runs(self, wanted: Callable[[LightningClass], bool]) -> Iterator[TrainerRun]: ...


@dataclass(frozen=True)
class Guard:
    """LL013's fix asked for in the script that starts the workers: the
    module-level code from the statement holding the node ``at`` (a summary
    ref) on, under the main guard, as the file's own LL013 guards it."""

    at: int


@dataclass(frozen=True)
class TakeBack:
    """``Rule.revise_own``: the file's own finding of the rule at the
    summary-numbered node ``at`` of ``path`` is none (another module shows it)."""

    path: str
    at: int


@dataclass(frozen=True)
class HoldFix:
    """``Rule.revise_own``: the fix of the file's own finding of the rule at
    ``at`` of ``path`` is withheld, ``reason`` the note shown for it;
    ``at`` None: of every finding of the rule in the file, the project's
    included (LL013's one guard for the script)."""

    path: str
    at: int | None
    reason: str


#: What the project shows about a file's own findings of a rule.
Revision = TakeBack | HoldFix


#: Keywords set on one call: (summary node ref of the call, keyword -> code,
#: applicability, label).
KeywordChange = tuple[int, dict[str, str], str, str]
#: The fix a project finding asks for, rendered and tried where it is found.
Change = KeywordChange | Guard


@dataclass(frozen=True)
class ProjectReport:
    """A finding of a rule's hook: at the summary-numbered node ``at`` of ``path``."""

    path: str
    at: int
    message: str
    change: Change | None = field(default=None)
