"""The rule contract.

A rule is one class in one module: its code, name, one-line summary, fix
availability, user documentation (the class docstring, in ruff's sections)
and the VALID/INVALID examples that the parametrised test runs.  ``check``
reads the call sites collected by ``loadlint.callsites`` and yields reports;
it never walks the tree itself.
"""

from __future__ import annotations

import abc
import textwrap
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Iterator, Literal

import libcst as cst

from loadlint.types import HardwareProfile

if TYPE_CHECKING:
    from loadlint.callsites import LoaderCall, ModuleInfo

FixAvailability = Literal["always", "sometimes", "none"]


@dataclass
class CallChange:
    """Keyword changes to one call: set (add or replace) and remove."""

    call: cst.Call
    set: dict[str, str] = field(default_factory=dict)
    remove: tuple[str, ...] = ()


@dataclass
class FixSpec:
    """What a fix does, declaratively; ``loadlint.fixes`` turns it into edits.

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


@dataclass
class Report:
    node: cst.CSTNode
    message: str
    fix: FixSpec | None = None


@dataclass(frozen=True)
class Settings:
    """Per-run options a rule may read (today: the target profile)."""

    profile: HardwareProfile


@dataclass
class Context:
    info: ModuleInfo
    settings: Settings
    path: str = "<stdin>"
    is_notebook: bool = False

    @property
    def profile(self) -> HardwareProfile:
        return self.settings.profile

    @property
    def distributed(self) -> bool:
        return bool(self.info.distributed)

    @property
    def calls(self) -> list[LoaderCall]:
        return self.info.calls


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
    #: One line for the README's rule table and SARIF shortDescription.
    summary: ClassVar[str]
    fix_availability: ClassVar[FixAvailability] = "none"
    #: Whether the rule reads the hardware profile (detection is lazy).
    needs_hardware: ClassVar[bool] = False
    VALID: ClassVar[list[Valid]] = []
    INVALID: ClassVar[list[Invalid]] = []

    @abc.abstractmethod
    def check(self, ctx: Context) -> Iterator[Report]:
        """Yield a report for each violation in the module."""

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
    """Examples are written indented in class bodies."""
    return textwrap.dedent(code).lstrip("\n")
