"""The rule contract.

A rule is one class in one module: its code, name, one-line summary, fix
availability and user documentation (the class docstring, in ruff's
sections).  Its VALID/INVALID examples, which the parametrised test runs, are
in ``loadlint.rules.examples``, in a module named by its code.  ``check``
reads the facts collected by ``loadlint.facts`` through a ``Context`` and
yields reports; it never walks the tree itself.  A rule with a cross-file
half defines ``check_project`` too, in the same class: it reads what the
project analysis joined (``loadlint.rules.project_context``).
"""

from __future__ import annotations

import abc
import re
import textwrap
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterator, Literal

import libcst as cst

from loadlint.facts.alive import AliveGroup, alive_groups
from loadlint.facts.collect import ModuleFacts, ProvidedFacts, provided_names
from loadlint.facts.datasets import dataset_class, is_iterable_dataset
from loadlint.facts.in_memory import in_memory_dataset, loading_pipeline
from loadlint.facts.distributed import conditional_start, lightning_hook
from loadlint.facts.iteration import Iteration
from loadlint.facts.live_source import live_source
from loadlint.facts.loaders import LoaderCall
from loadlint.facts.loops import epoch_uses
from loadlint.facts.names import ClassFacts, Key, LoopFrame, NameFacts
from loadlint.facts.pretokenized import pretokenized
from loadlint.facts.resolve import dotted_name, evaluate, follow_name
# A scope is a handle rules pass back to Context (``LoaderCall.scope_of``):
# exported for their annotations.
from loadlint.facts.resolve import Scope as Scope
from loadlint.rules.categories import CategoryName
from loadlint.rules.project_context import ProjectContext, ProjectReport, Revision
from loadlint.types import HardwareProfile

FixAvailability = Literal["always", "sometimes", "none"]

#: The comment ``loadlint fix --from-verify`` leaves next to a call whose
#: configuration it wrote: ``# loadlint: measured 8.65x on 2 CPUs, 2026-12-04``
#: (``, 1 GPU`` after the CPUs when the machine had GPUs).
MEASURED_MARK = re.compile(
    r"#\s*loadlint:\s*measured\s+(?P<speedup>[0-9]+(?:\.[0-9]+)?)x\s+on\s+(?P<cpus>[0-9]+)\s+CPUs?"
    r"(?:,\s*(?P<gpus>[0-9]+)\s+GPUs?)?,\s*(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})"
)


@dataclass(frozen=True)
class Measured:
    """A configuration measured by ``loadlint verify`` on a machine: the
    static rules that guess defer to it on that hardware."""

    text: str
    speedup: float
    cpus: int
    gpus: int | None
    date: str

    @classmethod
    def parse(cls, line: str) -> "Measured | None":
        m = MEASURED_MARK.search(line)
        if m is None:
            return None
        gpus = m.group("gpus")
        return cls(m.group(0).lstrip("#").strip(), float(m.group("speedup")), int(m.group("cpus")),
                   None if gpus is None else int(gpus), m.group("date"))

    def matches(self, profile: HardwareProfile) -> bool:
        """The target has the measured machine's CPUs (and GPUs, when counted)."""
        if profile.usable_cpus != self.cpus:
            return False
        return self.gpus is None or profile.gpu_count is None or (profile.gpu_count or 0) == self.gpus


@dataclass
class CallChange:
    """Keyword changes to one call: set (add or replace) and remove."""

    call: cst.Call
    set: dict[str, str] = field(default_factory=dict)
    remove: tuple[str, ...] = ()


@dataclass
class FixSpec:
    """What a fix does, declaratively; ``loadlint.engine.fixes`` turns it into edits.

    Several rules may change the same call: their CallChanges are merged so
    that the call is rewritten once.
    """

    applicability: Literal["safe", "unsafe"]
    message: str
    calls: list[CallChange] = field(default_factory=list)
    #: Replace a node's source with new code.
    replace: list[tuple[cst.CSTNode, str]] = field(default_factory=list)
    #: Import statements the new code needs, e.g. ``import os``.
    imports: list[str] = field(default_factory=list)
    #: Insert a statement as the first statement of a compound statement's body.
    prepend: list[tuple[cst.CSTNode, str]] = field(default_factory=list)
    #: Insert a statement (with its own newlines) at module level before the
    #: statement containing the node (for hoisting helpers out of functions).
    hoist: list[tuple[cst.CSTNode, str]] = field(default_factory=list)
    #: Set when the rule's own condition says the fix must not be applied
    #: here: why ("no fix: ..."), shown instead of the fix.
    withheld: str | None = None
    #: A trailing comment for the line where the node ends; one already
    #: there that ``MEASURED_MARK`` matches is replaced.
    comment: list[tuple[cst.CSTNode, str]] = field(default_factory=list)
    #: Consecutive top-level statements to indent under
    #: ``if __name__ == "__main__":`` (they stay in the module's namespace).
    guard: tuple[cst.BaseStatement, ...] = ()


@dataclass
class Report:
    node: cst.CSTNode
    message: str
    fix: FixSpec | None = None


class RuleSettings:
    """Per-run options a rule may read (today: the target profile, given or
    detected on first read: most files never need it)."""

    def __init__(self, profile: HardwareProfile | Callable[[], HardwareProfile]) -> None:
        self._profile = profile if isinstance(profile, HardwareProfile) else None
        self._factory = profile

    @property
    def profile(self) -> HardwareProfile:
        if self._profile is None:
            factory = self._factory
            self._profile = factory if isinstance(factory, HardwareProfile) else factory()
        return self._profile


class ProfileNotDeclared(RuntimeError):
    """A rule read the hardware profile without declaring ``needs_hardware``."""


class Context(ProvidedFacts):
    """What a rule may read about one module: its facts, by provider, and
    the run's settings.  The hardware profile is readable only where
    ``hardware`` is set: the engine gives each rule the context that matches
    its ``needs_hardware``."""

    def __init__(
        self, facts: ModuleFacts, settings: RuleSettings, path: str = "<stdin>", is_notebook: bool = False,
        *, hardware: bool = True,
    ) -> None:
        self.settings = settings
        self.path = path
        self.is_notebook = is_notebook
        #: Whether reading ``profile`` is allowed.
        self.hardware = hardware
        # The facts, by provider, under ``ProvidedFacts``'s names.
        for name in provided_names(type(facts)):
            setattr(self, name, getattr(facts, name))
        #: Every loader, the known subclasses included (``facts.signature.SUBCLASSES``):
        #: for rules that read only the keywords those forward to torch's.
        self.all_calls: list[LoaderCall] = facts.loaders.calls
        #: torch's own DataLoader: for rules that rely on its exact signature.
        self.calls: list[LoaderCall] = [call for call in self.all_calls if call.subclass is None]
        self.names: NameFacts = facts.names
        self._alive = facts.alive
        #: The module's top-level statements.
        self.statements = facts.statements
        #: Calls (by node id) with a measured configuration next to them.
        self.measured: dict[int, Measured] = {}

    @property
    def profile(self) -> HardwareProfile:
        """The target's hardware profile, for a rule that declares ``needs_hardware``."""
        if not self.hardware:
            raise ProfileNotDeclared("a rule without `needs_hardware = True` read the hardware profile")
        return self.settings.profile

    # -- values of expressions ------------------------------------------------
    # How the values resolve (names bound once, ``**dict`` keys, namespaces
    # of parsed arguments) is ``loadlint.facts.resolve``'s business; rules ask here.

    @staticmethod
    def evaluate(expr: cst.BaseExpression | None, scope: Scope | None) -> Any:
        """The value of an expression read in ``scope`` (``LoaderCall.scope_of``
        gives an argument's): a plain value, or UNKNOWN."""
        return evaluate(expr, scope)

    @staticmethod
    def follow(expr: cst.BaseExpression, scope: Scope | None) -> tuple[cst.BaseExpression, Scope | None]:
        """The expression a name bound exactly once stands for, with the scope
        to read it in (for its structure, not its value)."""
        return follow_name(expr, scope)

    @staticmethod
    def dotted(expr: cst.BaseExpression) -> str | None:
        """``a.b.c`` for a Name/Attribute chain, else None."""
        return dotted_name(expr)

    # -- facts joined across providers ---------------------------------------

    @property
    def distributed(self) -> bool:
        """The module shows distributed training."""
        return bool(self.launch.evidence)

    def keys_of(self, call: LoaderCall) -> set[Key]:
        """Every variable key the loader is reachable through."""
        return self.loaders.keys_of(call)

    def epoch_uses(self, call: LoaderCall, outlived: bool = False) -> list[tuple[LoopFrame, Iteration | None]]:
        """The loops in which the loader is iterated once per pass (epochs);
        ``outlived``: only those the loader outlives (not rebuilt per pass)."""
        return epoch_uses(call, self.loaders, self.loops, self.iteration, self.names, outlived)

    def dataset_class(self, call: LoaderCall) -> tuple[str | None, ClassFacts | None]:
        """(qualified name, local class) of the loader's dataset constructor."""
        return dataset_class(self.names, call)

    def is_iterable_dataset(self, call: LoaderCall) -> bool | None:
        """Whether the dataset is iterable-style; None when unknown."""
        return is_iterable_dataset(self.names, call)

    def in_memory_dataset(self, call: LoaderCall) -> bool:
        """The dataset is held in memory (workers would only add overhead)."""
        return in_memory_dataset(self.names, self.datasets, call)

    def loading_pipeline(self, call: LoaderCall) -> bool:
        """Workers would have loading work to take over: the dataset is not
        held in memory, pre-tokenized rows or a live source (``loadlint.facts.in_memory``)."""
        return loading_pipeline(self.names, self.datasets, call)

    def pretokenized_rows(self, call: LoaderCall) -> bool:
        """The loader pads pre-tokenized Hugging Face rows (``loadlint.facts.pretokenized``)."""
        return pretokenized(self.names, self.datasets, call)

    def alive_together(self, persistent: LoaderCall | None = None) -> list[AliveGroup]:
        """Loaders whose workers are certainly alive at the same time (as if
        ``persistent`` kept its workers, when given)."""
        return alive_groups(self.loaders, self._alive, persistent)

    def lightning_hook(self, call: LoaderCall) -> bool:
        """The loader is returned by a Lightning ``*_dataloader`` hook."""
        return lightning_hook(self.names, call)

    def live_source(self, call: LoaderCall) -> tuple[str, str, str] | None:
        """(class, object, mutating method) when the loop keeps changing an
        object the loader's iterable dataset reads (a replay buffer):
        workers would each read a frozen copy."""
        return live_source(self.names, self.datasets, call)

    def conditional_start(self, call: LoaderCall) -> cst.BaseExpression | None:
        """The condition under which the loader's function starts distributed
        training, when it starts it only under one; else None."""
        return conditional_start(self.names, self.launch, call)


@dataclass(frozen=True)
class Valid:
    code: str
    profile: HardwareProfile | None = None
    path: str = "example.py"


@dataclass(frozen=True)
class Invalid:
    code: str
    #: Expected message (exact); None skips the check.
    message: str | None = None
    #: Source after applying this rule's fixes (unsafe ones included); None
    #: when the rule offers no fix for this case.
    fixed: str | None = None
    profile: HardwareProfile | None = None
    #: 1-based line of the finding; None skips the check.
    line: int | None = None
    count: int = 1
    path: str = "example.py"


class Rule(abc.ABC):
    code: ClassVar[str]
    name: ClassVar[str]
    #: What the finding means (``loadlint.rules.categories``): its severity,
    #: whether a fix may introduce it, whether test files get it.  Written
    #: as a literal (``category = "crash"``): the registry reads it without
    #: importing the module.
    category: ClassVar[CategoryName]
    #: One line for the README's rule table and SARIF shortDescription.
    summary: ClassVar[str]
    fix_availability: ClassVar[FixAvailability] = "none"
    #: Whether the rule reads the hardware profile (``Context.profile``
    #: raises otherwise; the profile is detected only when a rule reads it).
    needs_hardware: ClassVar[bool] = False
    #: Derived, never set: the class defines ``check_project``, so the
    #: project analysis reports it too, joined across files (a ``noqa`` for
    #: it is then never called unused).
    across_files: ClassVar[bool] = False
    #: Whether the hook's findings, made as if a file's fix had started
    #: workers (``ProjectContext.what_if``), withhold that fix; the lowest
    #: number is asked first, and its first finding is the reason.  0: not asked.
    project_hazard: ClassVar[int] = 0
    #: Where this rule's reasons go among the worker hazards of LL201's fix
    #: note: crashes first, then wrong data.
    hazard_order: ClassVar[int] = 0
    #: Whether a finding another fix would introduce may be left to this
    #: rule's fix in the next round; False for a fix that reshapes a script
    #: (it is applied where its finding was already, never as a consequence).
    implied_fix: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.across_files = cls.check_project is not Rule.check_project

    @abc.abstractmethod
    def check(self, ctx: Context) -> Iterator[Report]:
        """Yield a report for each violation in the module."""

    def check_project(self, project: ProjectContext) -> Iterator[ProjectReport]:
        """The rule's cross-file half: what a single file cannot show, read
        from the project analysis's joins (``loadlint.rules.project_context``).
        A rule that defines it is ``across_files``."""
        return iter(())

    def revise_own(self, project: ProjectContext) -> Iterator[Revision]:
        """What the project shows about the files' own findings of this
        rule: one to take back (``TakeBack``), a fix to withhold with its
        reason (``HoldFix``).  Asked once the project hooks have reported
        (``ProjectContext.introduced``, ``reported``), and for the loaders
        over another module's dataset class (``ProjectContext.imported``)."""
        return iter(())

    def worker_hazards(self, ctx: Context, call: LoaderCall) -> list[str]:
        """Why starting workers at ``call`` would make this rule fire (its
        condition without the worker gate).  A rule that overrides this is a
        worker hazard: LL201's fix is unsafe where one applies."""
        return []

    def imported_worker_hazards(self, project: ProjectContext) -> Iterator[ProjectReport]:
        """Across files: at loaders whose dataset class another module
        defines (``project.imported``), why starting workers would make this
        rule fire; LL201's fix is withheld there, the message its reason."""
        return iter(())

    @classmethod
    def documentation(cls) -> str:
        """The rule's page: ``# name (CODE)`` and the docstring's sections."""
        body = textwrap.dedent(cls.__doc__ or "").strip()
        return f"# {cls.name} ({cls.code})\n\n{body}\n"

    @classmethod
    def url(cls) -> str:
        from loadlint import DOCS_URL

        return f"{DOCS_URL}/{cls.code}.md"


def dedent(code: str) -> str:
    """Examples are written indented in their lists."""
    return textwrap.dedent(code).lstrip("\n")
