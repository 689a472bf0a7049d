"""Each rule's VALID and INVALID examples, in ``llNNN.py`` named by its code.

The examples are the rule's tests (as in Fixit): ``tests/test_rules.py``
runs every one.  They live beside the rules rather than in them, so that a
rule module's size is its logic; nothing in the analysis imports them.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

from loadlint.rules.base import Invalid, Rule, Valid


class Examples(NamedTuple):
    valid: list[Valid]
    invalid: list[Invalid]


def module_of(code: str) -> str:
    """``LL003`` -> ``loadlint.rules.examples.ll003``."""
    return f"{__name__}.{code.lower()}"


def examples_of(rule: type[Rule]) -> Examples:
    """The rule's examples; LookupError when its module is missing or does
    not declare both lists."""
    try:
        module = importlib.import_module(module_of(rule.code))
    except ModuleNotFoundError as error:
        raise LookupError(f"{rule.code} has no examples module ({module_of(rule.code)})") from error
    valid, invalid = getattr(module, "VALID", None), getattr(module, "INVALID", None)
    if not isinstance(valid, list) or not isinstance(invalid, list):
        raise LookupError(f"{module.__name__} must declare VALID and INVALID lists")
    return Examples(valid, invalid)
