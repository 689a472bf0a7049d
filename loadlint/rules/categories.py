"""What kind of problem a rule reports: each rule class declares one
category, and severities, the guard on fixes, test files' defaults, the
report formats and the rule pages read it, never the code's digits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

CategoryName = Literal["crash", "data-bug", "performance", "syntax", "unreadable", "noqa"]


@dataclass(frozen=True)
class Category:
    key: CategoryName
    #: How the README names the category's findings.
    title: str
    severity: Literal["error", "warning"]
    #: A fix must never introduce a finding of this category: the program
    #: would crash, or the file would no longer parse.
    breaks_program: bool = False
    #: Reported by the engine (reading, parsing, ``noqa`` comments), not by
    #: a rule's ``check``.
    engine: bool = False
    #: Reported in test files unless ``performance-in-tests`` says otherwise
    #: (a test's loader is sized for the test, not for training speed).
    in_tests: bool = True


CATEGORIES: dict[str, Category] = {
    category.key: category
    for category in (
        Category("crash", "crashes", "error", breaks_program=True),
        Category("data-bug", "silent data bugs", "error"),
        Category("performance", "slow paths", "warning", in_tests=False),
        Category("syntax", "files that do not parse", "error", breaks_program=True, engine=True),
        Category("unreadable", "files that cannot be read", "error", engine=True),
        Category("noqa", "`# noqa` comments that suppress nothing", "warning", engine=True),
    )
}
