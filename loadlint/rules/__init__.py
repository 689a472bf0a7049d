"""The rule registry, built from the rule modules' file names.

A rule lives in ``llNNN_snake_name.py``: the file name gives its code
(``LLNNN``) and name (``snake-name``), so adding the file registers the
rule.  The registry is read without importing the modules: selection,
``noqa``, severities and ``--statistics`` work without loading libcst, which
keeps start-up fast for files that never reach a rule (a cached run).  A
module is imported when its rule first runs.

A rule's category (``Rule.category``) is read the same way, from the
``category = "..."`` line of its class; a test checks it against the class.
The worker hazards are found on the rule classes (those that override
``Rule.worker_hazards``).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

from loadlint.rules.categories import CATEGORIES, Category

if TYPE_CHECKING:
    from loadlint.facts.loaders import LoaderCall
    from loadlint.rules.base import Context, Rule

#: A rule module's name: its code's digits, then its name in snake case.
RULE_MODULE = re.compile(r"ll(?P<digits>[0-9]{3})_(?P<snake>[a-z0-9]+(?:_[a-z0-9]+)*)")
#: The category a rule class declares (one per module).
_CATEGORY_LINE = re.compile(r'^[ \t]+category(?:[ \t]*:[^=\n]*)?[ \t]*=[ \t]*"(?P<category>[a-z-]+)"', re.M)


class RuleEntry(NamedTuple):
    #: The rule's name (``prefetch-without-workers``).
    name: str
    #: Its module under ``loadlint.rules``.
    module: str


def _registry() -> dict[str, RuleEntry]:
    found: dict[str, RuleEntry] = {}
    for info in pkgutil.iter_modules(__path__):
        match = RULE_MODULE.fullmatch(info.name)
        if match is not None and not info.ispkg:
            code = f"LL{match.group('digits')}"
            found[code] = RuleEntry(match.group("snake").replace("_", "-"), info.name)
    return dict(sorted(found.items()))


#: code -> (name, module under loadlint.rules), by code.
CODES: dict[str, RuleEntry] = _registry()

#: Rules that are opt-in (``--select``/``extend-select``), as ruff's preview.
DEFAULT_OFF: frozenset[str] = frozenset()


def name_of(code: str) -> str:
    return CODES[code].name


@lru_cache(maxsize=None)
def category_of(code: str) -> Category:
    """The category the rule's class declares, read from its module's text."""
    module = CODES[code].module
    data = pkgutil.get_data(__name__, f"{module}.py")
    found = _CATEGORY_LINE.findall(data.decode("utf-8")) if data is not None else []
    if len(found) != 1 or found[0] not in CATEGORIES:
        raise LookupError(f"{module}.py must declare one category (one of {', '.join(CATEGORIES)}), found {found}")
    return CATEGORIES[found[0]]


@lru_cache(maxsize=None)
def codes_where(**wanted: object) -> frozenset[str]:
    """The codes whose category has the given attributes, e.g.
    ``codes_where(engine=True)``."""
    return frozenset(
        code for code in CODES if all(getattr(category_of(code), key) == value for key, value in wanted.items())
    )


@lru_cache(maxsize=None)
def rule_class(code: str) -> type[Rule]:
    """The one rule class its module defines (imported on first use)."""
    from loadlint.rules.base import Rule

    module = importlib.import_module(f"{__name__}.{CODES[code].module}")
    classes = [
        value for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, Rule) and value.__module__ == module.__name__
    ]
    if len(classes) != 1:
        raise LookupError(f"{module.__name__} must define one rule class, found {len(classes)}")
    return classes[0]


#: A rule class's project hook (``Rule.check_project``), as its module writes it.
_PROJECT_HOOK = re.compile(r"^[ \t]+def check_project\(", re.M)


@lru_cache(maxsize=None)
def project_rules() -> tuple[Rule, ...]:
    """The rules with a cross-file half, by code: found from their modules'
    text, so that only those modules are imported (a test checks the text
    against ``Rule.across_files``)."""
    return _defining(_PROJECT_HOOK)


#: A rule class's revision of its own findings (``Rule.revise_own``).
_REVISE_HOOK = re.compile(r"^[ \t]+def revise_own\(", re.M)


@lru_cache(maxsize=None)
def revising_rules() -> tuple[Rule, ...]:
    """The rules that revise their own findings from the project's joins,
    by code, found as ``project_rules`` are."""
    return _defining(_REVISE_HOOK)


def _defining(hook: re.Pattern[str]) -> tuple[Rule, ...]:
    found = []
    for code, entry in CODES.items():
        data = pkgutil.get_data(__name__, f"{entry.module}.py")
        if data is not None and hook.search(data.decode("utf-8")):
            found.append(rule_class(code)())
    return tuple(found)


def all_rules() -> list[type[Rule]]:
    """Every rule class, by code."""
    return [rule_class(code) for code in CODES]


@lru_cache(maxsize=None)
def hazard_rules() -> tuple[Rule, ...]:
    """The rules that are worker hazards, in the order their reasons are given."""
    from loadlint.rules.base import Rule

    hazards = [rule for rule in all_rules() if rule.worker_hazards is not Rule.worker_hazards]
    return tuple(rule() for rule in sorted(hazards, key=lambda rule: rule.hazard_order))


def worker_hazards(ctx: Context, call: LoaderCall) -> list[str]:
    """Reasons why starting workers at this call may crash or corrupt data:
    the conditions of the worker-hazard rules without their worker gate, so
    that a fix adding workers is unsafe exactly where they would fire after it."""
    return [reason for rule in hazard_rules() for reason in rule.worker_hazards(ctx, call)]


def unimportable_dataset(ctx: Context, call: LoaderCall) -> str | None:
    """Why a fix starting workers at a notebook's loader is withheld
    (``loadlint.rules.importable``), or None."""
    from loadlint.rules.importable import unimportable_dataset as why

    return why(ctx, call)
