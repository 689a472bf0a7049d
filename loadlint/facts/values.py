"""What resolving an expression gives: a plain Python value, ``UNKNOWN``
or ``MISSING``, and where an overridable default comes from.

Rules compare with these; how values are resolved (``loadlint.facts.resolve``)
stays behind ``Context``.  Rules stay silent on ``UNKNOWN``: a false positive
costs more trust than a miss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import libcst as cst


class _Sentinel:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def __bool__(self) -> bool:  # a sentinel used as a condition is a bug
        raise TypeError(f"{self.name} has no truth value")


#: The value cannot be decided statically.
UNKNOWN: Any = _Sentinel("UNKNOWN")
#: The argument is certainly absent from the call.
MISSING: Any = _Sentinel("MISSING")


def is_known(value: object) -> bool:
    return value is not UNKNOWN and value is not MISSING


@dataclass(frozen=True)
class Origin:
    """Where a value the code reads comes from when it is a default the user
    may override (a command-line option, a dataclass field)."""

    #: How a message names it: "with the default `--workers 16`".
    text: str
    #: The default's expression: a fix edits it rather than the use.  None
    #: when there is no expression to edit (``action="store_true"``).
    node: cst.BaseExpression | None = None
