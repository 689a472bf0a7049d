"""The rule registry against the rule modules: every module registered under
its code, examples for every rule, and declarations that match behaviour
(fix availability, hardware profile, worker hazards)."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

from loadlint.engine.analysis import Options, analyse
from loadlint.facts.collect import collect
from loadlint.rules import CODES, all_rules, hazard_rules, rule_class
from loadlint.rules.base import Context, Invalid, ProfileNotDeclared, Rule, Settings, dedent
from loadlint.testing import EXAMPLE_PROFILE

RULES_DIR = Path(__file__).resolve().parent.parent / "loadlint" / "rules"


def test_every_rule_module_is_in_codes():
    on_disk = {path.stem for path in RULES_DIR.glob("ll*.py")}
    assert on_disk == {module for _, module, _ in CODES.values()}


@pytest.mark.parametrize("code", sorted(CODES))
def test_codes_entry_names_the_modules_one_rule(code):
    name, module_name, class_name = CODES[code]
    assert module_name.startswith(code.lower() + "_")
    module = importlib.import_module(f"loadlint.rules.{module_name}")
    rules = [
        cls for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, Rule) and cls is not Rule and cls.__module__ == module.__name__
    ]
    assert [cls.__name__ for cls in rules] == [class_name]
    rule = rule_class(code)
    assert (rule.code, rule.name) == (code, name)


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_every_rule_has_valid_and_invalid_examples(rule):
    assert rule.VALID, f"{rule.code} has no VALID example"
    assert rule.INVALID, f"{rule.code} has no INVALID example"


def _first_finding(rule: type[Rule], example: Invalid, profile_reads: list[int]):
    def profile():
        profile_reads.append(1)
        return example.profile or EXAMPLE_PROFILE

    options = Options(select=frozenset({rule.code}), profile_factory=profile)
    findings, _ = analyse(dedent(example.code), example.path, options, notebook=example.path.endswith(".ipynb"))
    return next(f for f in findings if f.code == rule.code)


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_fix_availability_matches_what_the_examples_fix(rule):
    offered = [_first_finding(rule, example, []).fix is not None for example in rule.INVALID]
    expected = {"always": all(offered), "none": not any(offered), "sometimes": any(offered) and not all(offered)}
    assert expected[rule.fix_availability], f"{rule.code} is {rule.fix_availability!r} but fixes {offered}"


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_rules_that_declare_the_profile_read_it(rule):
    # The converse is enforced by Context: a rule that did not declare it
    # raises ProfileNotDeclared, and every example runs in test_rules.
    reads: list[int] = []
    for example in rule.INVALID:
        _first_finding(rule, example, reads)
    assert bool(reads) == rule.needs_hardware, f"{rule.code}: needs_hardware={rule.needs_hardware}, read={bool(reads)}"


def test_an_undeclared_profile_read_raises():
    import libcst as cst

    class Reader(Rule):
        code, name, summary = "LL999", "reader", "reads the profile"

        def check(self, ctx):
            assert ctx.profile is not None
            return iter(())

    facts = collect(cst.parse_module("x = 1\n"))
    with pytest.raises(ProfileNotDeclared):
        Reader().check(Context(facts, Settings(EXAMPLE_PROFILE), hardware=False))
    assert list(Reader().check(Context(facts, Settings(EXAMPLE_PROFILE), hardware=True))) == []


def test_worker_hazards_are_the_rules_that_declare_them():
    assert [type(rule).code for rule in hazard_rules()] == ["LL007", "LL012", "LL014", "LL105", "LL104", "LL103"]
