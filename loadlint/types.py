"""Plain data shared by every layer: findings, fixes, hardware profiles,
per-file results, runs, and the options that travel between them.

A leaf module: at run time it imports nothing from loadlint, so any layer
may import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Callable, Literal, TypedDict, Union

if TYPE_CHECKING:
    from loadlint.sources.source import Source

Applicability = Literal["safe", "unsafe"]


@dataclass(frozen=True, order=True)
class Location:
    """1-based row and 1-based column (end columns are exclusive)."""

    row: int
    column: int


@dataclass(frozen=True)
class Edit:
    """Replace ``source[start:end]`` (character offsets) with ``content``."""

    content: str
    start: int
    end: int
    location: Location
    end_location: Location


@dataclass(frozen=True)
class Fix:
    """An automatic fix: its edits apply together or not at all."""

    applicability: Applicability
    message: str
    edits: tuple[Edit, ...]


@dataclass
class Finding:
    """One rule's report at one place of one file."""

    code: str
    name: str
    message: str
    path: str
    location: Location
    end_location: Location
    fix: Fix | None = None
    #: 1-based notebook cell index; None for plain Python files.
    cell: int | None = None
    #: Why the rule's fix is not offered here (it would introduce a finding).
    fix_withheld: str | None = None

    @property
    def fixable(self) -> bool:
        """Whether the finding carries a fix (safe or unsafe)."""
        return self.fix is not None


@dataclass(frozen=True)
class GPU:
    """One accelerator of a hardware profile."""

    name: str
    memory_bytes: int | None = None


@dataclass(frozen=True)
class Target:
    """The training machine as declared (``--target SPEC``, ``[tool.loadlint.target]``,
    ``target = "detect"``, the table ``init`` writes): parsed and validated
    once (``hardware.detect.parse_target``, ``validate_target``), then carried
    as is to the profile the rules read.  A key left None is not declared;
    ``detect`` has filled in this machine's values already.  Hashable: the
    profile cache's key."""

    cpus: int | None = None
    gpus: int | None = None
    #: Bytes.
    memory: int | None = None
    #: Bytes.
    shm: int | None = None
    #: linux, macos or windows.
    platform: str | None = None
    #: ``major.minor``.
    python: str | None = None
    #: ``major`` or ``major.minor``.
    torch: str | None = None

    def items(self) -> list[tuple[str, int | str]]:
        """The declared (key, value) pairs, in the documented order."""
        return [(f.name, value) for f in fields(self) if (value := getattr(self, f.name)) is not None]

    @property
    def declared(self) -> frozenset[str]:
        return frozenset(key for key, _ in self.items())

    def __bool__(self) -> bool:
        return bool(self.items())

    def over(self, base: Target) -> Target:
        """``base`` with this target's declared keys in place of its own."""
        declared: dict[str, Any] = dict(self.items())
        return replace(base, **declared)


@dataclass(frozen=True)
class HardwareProfile:
    """The machine the rules reason about: detected, declared, or a mix.

    ``declared`` names the keys a target set explicitly; rules that must
    give the portable answer when a key is not declared (the start method
    depends on platform and python) look there.
    """

    usable_cpus: int
    logical_cpus: int | None = None
    physical_cores: int | None = None
    affinity_cpus: int | None = None
    cgroup_cpus: float | None = None
    memory_total: int | None = None
    memory_available: int | None = None
    shm_bytes: int | None = None
    gpus: tuple[GPU, ...] = ()
    #: 0 without an NVIDIA driver; None when NVML loads but cannot count.
    gpu_count: int | None = None
    platform: str = "linux"
    python: str = "3.11"
    torch: str = "2"
    declared: frozenset[str] = field(default_factory=frozenset)
    #: This machine's CPUs as a fix's run-time worker count reads them
    #: (``hardware.workers.run_time_cpus``), where the rules' profile
    #: declares no CPU count: messages quote the count it gives as a hint
    #: beside the fix, and no verdict reads it.
    here_cpus: int | None = None

    @property
    def label(self) -> str:
        """Short description used in messages that depend on hardware."""
        gpus = "? GPUs" if self.gpu_count is None else _count(self.gpu_count, "GPU")
        if not self.declared:
            return f"detected: {_count(self.usable_cpus, 'CPU')}, {gpus}"
        cpus = _count(self.usable_cpus, "CPU") if "cpus" in self.declared else "? CPUs"
        return f"target: {cpus}, {gpus}"


def _count(n: int, unit: str) -> str:
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


@dataclass(frozen=True)
class Options:
    """What to check: the selected codes and the hardware profile."""

    select: frozenset[str]
    profile_factory: Callable[[], HardwareProfile]
    #: Honour ``# noqa`` comments; off for flake8, which applies its own.
    noqa: bool = True

    def profile(self) -> HardwareProfile:
        """The hardware profile, resolved on demand."""
        return self.profile_factory()


@dataclass
class FixRequest:
    """Fix as well as check: which fixes, and whether to write them."""

    unsafe: bool = False
    #: Compute fixes but write nothing (--diff).
    dry_run: bool = False
    #: By absolute path, the (code, row, column) of findings whose fix is
    #: not applied: project analysis takes them back (``loadlint.project.join``).
    skip: dict[str, frozenset[tuple[str, int, int]]] = field(default_factory=dict)


class Applied(dict[str, int]):
    """Fixes applied, code -> count.  ``later`` counts those of the rounds
    after the first: fixes the first round's made possible, which ``check``
    cannot offer yet (the summary names both)."""

    later: int = 0


@dataclass
class FileResult:
    """What checking (or fixing) one file produced."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    #: Text after fixes, when fixing changed it.
    fixed: str | None = None
    source: Source | None = None
    #: Fixes applied (code -> count), for --show-fixes.
    applied: dict[str, int] = field(default_factory=dict)
    #: An internal failure for this file (never a traceback to the user).
    error: str | None = None
    #: A notebook's checked cells (index -> source), for quoting lines.
    cell_sources: dict[int, str] = field(default_factory=dict)
    #: (cell, before, after) for each notebook cell a fix changed.
    cell_changes: list[tuple[int, str, str]] = field(default_factory=list)
    #: The module's project summary (``loadlint.facts.summary``), when parsed.
    summary: Summary | None = None
    #: The summary as JSON, as the cache holds it, when ``summary`` is not
    #: set: decoded only if the project's findings are not cached either.
    summary_json: str | None = None

    @property
    def worth_reporting(self) -> bool:
        """Whether the result says anything: a finding, an error or a fix."""
        return bool(self.findings or self.error or self.fixed is not None)

    def carry(self, later: FileResult) -> None:
        """Add what a later round of a fix applied to the same file."""
        for code, count in later.applied.items():
            self.applied[code] = self.applied.get(code, 0) + count
        if later.fixed is not None:
            self.fixed = later.fixed


@dataclass
class Run:
    """The results of one check or fix over many files."""

    results: list[FileResult] = field(default_factory=list)
    #: Files that were considered (after discovery), for statistics.
    files: int = 0
    parsed: int = 0
    #: Of the fixes a fix run applied, those ``check`` could not offer before
    #: it (fixes made possible by others, in the file or across the project);
    #: None: count each file's own (``Applied.later``).
    later: int | None = None

    @classmethod
    def of(cls, results: list[FileResult]) -> Run:
        """The run over these files: the results worth reporting, by path."""
        kept = sorted((r for r in results if r.worth_reporting), key=lambda r: r.path)
        return cls(kept, files=len(results))

    @property
    def findings(self) -> list[Finding]:
        """Every finding of every file, in result order."""
        return [f for r in self.results for f in r.findings]

    @property
    def errors(self) -> list[FileResult]:
        """The results of the files that failed."""
        return [r for r in self.results if r.error]


#: Formats meant for people: they get colour, source lines and the summary.
HUMAN_FORMATS = frozenset({"full", "concise"})


# -- project summaries -------------------------------------------------------
#
# What ``loadlint.facts.summary`` keeps of a module for project analysis, as
# plain JSON (the cache stores it as is): typed here, where the engine, the
# cache and ``loadlint.project`` meet, so that every read is checked.  The
# keys are the JSON's; a base class holds the keys every summary has, its
# ``total=False`` subclass the keys that may be absent.

#: A value a summary can hold as itself.
Scalar = Union[int, float, str, bool, None]

#: A value descriptor: ``{"value": 4}``, ``{"cpu_count": true}``,
#: ``{"param": "p"}``, ``{"loader": i}`` (the function's i-th loader),
#: ``{"call": i, "index": j}`` (part of the i-th call's result),
#: ``{"import": "config.WORKERS"}``, ``{"sampler": i}``, ``{"device": "cuda"}``,
#: ``{"lambda": true}``, or ``{}`` (unknown).  ``note`` says where a value
#: comes from; ``at`` numbers a constant's node; ``default`` marks a
#: parameter's default and ``unbound`` a parameter no caller gave a value
#: (both added by the project walk, never stored).  ``{"param": "args",
#: "attribute": "n_cpu"}`` reads an attribute of a parameter; ``{"options":
#: {...}}`` is a parsed namespace passed as an argument (``from``: the module
#: that passed it, added by the walk).
Descriptor = TypedDict(
    "Descriptor",
    {
        "value": Scalar, "cpu_count": bool, "param": str, "loader": int, "call": int, "index": Union[int, str, None],
        "import": str, "sampler": int, "device": str, "lambda": bool, "note": str, "at": int, "default": bool,
        "unbound": bool, "options": dict[str, Any], "text": str, "tree": Any, "attribute": str, "from": str,
        "memory": bool, "of": int,
    },
    total=False,
)


class _LoaderRequired(TypedDict):
    at: int
    #: Loader keyword -> the function's parameter passed to it as is.
    kw: dict[str, str]
    #: The settings project analysis reads (absent: torch's default).
    values: dict[str, Descriptor]
    #: The name it is bound to, if any.
    var: str | None


class LoaderSummary(_LoaderRequired, total=False):
    """One ``DataLoader(...)`` a function builds."""

    #: The dataset, when it is a parameter of the function (the callers'
    #: values decide whether it is held in memory).
    dataset: Descriptor


class SamplerSummary(TypedDict, total=False):
    """One ``DistributedSampler(...)``: where, and its ``shuffle`` when given."""

    at: int
    shuffle: Descriptor


class CallSummary(TypedDict):
    """A call to a project function: ``callee`` is qualified by the import
    (``data.make``) or ``:name`` for the module's own; ``args`` by keyword or
    position (``"0"``), ``"*"`` when unpacked."""

    callee: str
    at: int
    in_loop: bool
    guarded: bool
    args: dict[str, Descriptor]


#: ``for x in loader``; ``next(iter(loader))``; ``iter(loader)``; a batch moved (``.to``, ``.cuda``).
UseKind = Literal["iter", "next_iter", "iter_call", "transfer"]


class _UseRequired(TypedDict):
    kind: UseKind
    #: The loader used: a parameter, a loader built here, or a call's result.
    of: Descriptor
    at: int


class Use(_UseRequired, total=False):
    """What a function does with a loader (``transfer``: with its batches)."""

    in_loop: bool
    guarded: bool
    #: A module-level loader iterated in this function.
    in_function: str
    method: str
    non_blocking: bool
    plain: bool
    device: Descriptor


class _ReturnsRequired(TypedDict):
    tuple: bool
    values: list[Descriptor]


class Returns(_ReturnsRequired, total=False):
    """What a function returns: one value, or a literal's items; ``keys``
    names a returned dict literal's, in order (``{"train": loader}``)."""

    keys: list[str]
    #: By a number of names other than ``values``' the result is unpacked
    #: into, the members that are datasets held in memory in every tuple
    #: literal of that length the function returns (``return ds, examples,
    #: features`` beside a last ``return ds``).
    unpacked: dict[str, list[int]]


class _FunctionRequired(TypedDict):
    params: list[str]
    loaders: list[LoaderSummary]
    calls: list[CallSummary]
    uses: list[Use]
    #: The names its descriptors import.
    reads: list[str]


class FunctionSummary(_FunctionRequired, total=False):
    """A function (or ``"<module>"``, the module body, without ``at`` and defaults)."""

    at: int
    defaults: dict[str, Descriptor]
    has_default: list[str]
    samplers: list[SamplerSummary]
    returns: Returns


class _FlagsRequired(TypedDict):
    cuda: bool
    cuda_code: bool
    set_epoch: bool
    frameworks: bool
    start_methods: list[str]


class Flags(_FlagsRequired, total=False):
    """What the module's own rules see (``cuda``: CUDA evidence as LL202 reads it)."""

    #: Top-level statements that start workers outside a main guard (LL013's fix).
    unguarded_starts: bool


#: A loader's dataset built from an imported class; its literal worker
#: count and ``multiprocessing_context`` when written (``"?"``: not a string).
_ImportedDatasetRequired = TypedDict("_ImportedDatasetRequired", {"at": int, "class": str})


class ImportedDataset(_ImportedDatasetRequired, total=False):
    workers: int
    #: The count as written where it is no known number but at least 1 for
    #: every input (``LOADER_WORKERS``, ``os.cpu_count()``).
    workers_code: str
    context: Union[str, None]


class GpuRun(TypedDict):
    """``trainer.fit(...)`` of a Lightning Trainer on the GPU: the qualified
    callees whose results it is handed (``data.MNISTDataModule``)."""

    at: int
    accelerator: str
    method: str
    handed: list[str]


class _SummaryRequired(TypedDict):
    version: int
    imports: dict[str, str]
    functions: dict[str, FunctionSummary]
    flags: Flags


class Summary(_SummaryRequired, total=False):
    """A module's project summary."""

    in_memory_classes: list[str]
    #: Classes whose ``__init__`` keeps an unpicklable handle (LL014 across modules).
    handle_classes: dict[str, dict[str, Any]]
    #: Config files (YAML) a function reads: scope, name, file, kind.
    config_files: list[dict[str, str]]
    imported_datasets: list[ImportedDataset]
    #: Plain functions returning pre-tokenized rows (``rows``) or a padding
    #: collate (``collates``), for loaders of other modules (LL201).
    padded_rows: dict[str, list[str]]
    #: Loaders built from another module's such functions: ``at`` and the
    #: qualified ``rows`` and ``collates`` functions.
    imported_rows: list[dict[str, Any]]
    constants: dict[str, Descriptor]
    #: Module-level ``LightningModule``/``LightningDataModule`` classes.
    lightning_classes: list[str]
    #: What the module hands to a Lightning Trainer on the GPU.
    gpu_runs: list[GpuRun]
