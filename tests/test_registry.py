"""The rule registry against the rule modules: every module registered under
its code, examples for every rule, and declarations that match behaviour
(fix availability, hardware profile, worker hazards)."""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loadlint.engine.analysis import analyse
from loadlint.engine.withhold import declared

from loadlint.types import Options
from loadlint.facts.collect import collect
from loadlint.rules import CODES, all_rules, category_of, hazard_rules, project_rules, revising_rules, rule_class
from loadlint.rules.categories import CATEGORIES
from loadlint.rules.examples import examples_of, module_of
from loadlint.rules.base import Context, Invalid, ProfileNotDeclared, Rule, RuleSettings, dedent
from loadlint.testing import EXAMPLE_PROFILE

RULES_DIR = Path(__file__).resolve().parent.parent / "loadlint" / "rules"


def test_every_rule_module_is_in_codes():
    on_disk = {path.stem for path in RULES_DIR.glob("ll*.py")}
    assert on_disk == {module for _, module in CODES.values()}
    assert list(CODES) == sorted(CODES)


@pytest.mark.parametrize("code", sorted(CODES))
def test_codes_entry_names_the_modules_one_rule(code):
    name, module_name = CODES[code]
    assert module_name == f"{code.lower()}_{name.replace('-', '_')}"
    module = importlib.import_module(f"loadlint.rules.{module_name}")
    rules = [
        cls for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, Rule) and cls is not Rule and cls.__module__ == module.__name__
    ]
    assert rules == [rule_class(code)]
    rule = rule_class(code)
    assert (rule.code, rule.name) == (code, name)


@pytest.mark.parametrize("code", sorted(CODES))
def test_the_category_read_from_the_text_is_the_classs(code):
    assert category_of(code) is CATEGORIES[rule_class(code).category]


def test_a_new_rule_file_is_registered_without_editing_a_list(tmp_path):
    # A copy of the package with one more rule module: the registry of a
    # fresh interpreter has it, name and category from the file alone.
    package = tmp_path / "loadlint"
    shutil.copytree(RULES_DIR.parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "rules" / "ll299_slow_example.py").write_text(NEW_RULE)
    script = (
        "from loadlint.rules import CODES, category_of, rule_class\n"
        "r = rule_class('LL299')\n"
        "print(CODES['LL299'], category_of('LL299').key, r.__name__, r.code)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "RuleEntry(name='slow-example', module='ll299_slow_example') performance SlowExample LL299\n"


NEW_RULE = '''
from loadlint.rules.base import Rule


class SlowExample(Rule):
    code = "LL299"
    name = "slow-example"
    category = "performance"
    summary = "an example"

    def check(self, ctx):
        return iter(())
'''


def test_a_rule_without_a_category_line_is_refused(monkeypatch):
    import loadlint.rules as registry

    monkeypatch.setattr(registry.pkgutil, "get_data", lambda package, name: b"class X(Rule):\n    code = 'LL001'\n")
    registry.category_of.cache_clear()
    try:
        with pytest.raises(LookupError, match="ll001_prefetch_without_workers.py must declare one category"):
            registry.category_of("LL001")
    finally:
        registry.category_of.cache_clear()


def test_no_list_of_rule_codes_is_kept_by_hand():
    # Codes belong to the rule modules: a literal collection naming two or
    # more rule codes anywhere in the package is a second list to keep in step.
    found = []
    for path in RULES_DIR.parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            elements = node.elts if isinstance(node, (ast.Set, ast.List, ast.Tuple)) else (
                node.keys if isinstance(node, ast.Dict) else [])
            codes = [e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value in CODES]
            if len(codes) > 1:
                found.append(f"{path.relative_to(RULES_DIR.parent.parent)}:{node.lineno}: {codes}")
    assert found == []


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_every_rule_has_valid_and_invalid_examples(rule):
    examples = examples_of(rule)
    assert examples.valid, f"{rule.code} has no VALID example"
    assert examples.invalid, f"{rule.code} has no INVALID example"


def test_examples_modules_are_named_by_the_rules_codes():
    # One module per rule: a stray module (a renamed code) would never run.
    modules = {path.stem for path in (RULES_DIR / "examples").glob("*.py") if path.stem != "__init__"}
    assert modules == {code.lower() for code in CODES}
    assert module_of("LL003") == "loadlint.rules.examples.ll003"


def test_a_rule_without_an_examples_module_is_refused():
    class Unexampled(Rule):
        code = "LL999"
        name = "unexampled"
        category = "crash"
        summary = "never registered"

        def check(self, ctx):
            return iter(())

    with pytest.raises(LookupError, match=r"^LL999 has no examples module \(loadlint\.rules\.examples\.ll999\)$"):
        examples_of(Unexampled)


def _first_finding(rule: type[Rule], example: Invalid, profile_reads: list[int]):
    def profile():
        profile_reads.append(1)
        return example.profile or EXAMPLE_PROFILE

    options = Options(select=frozenset({rule.code}), profile_factory=profile)
    findings, analysis = analyse(dedent(example.code), example.path, options, notebook=example.path.endswith(".ipynb"))
    if analysis is not None:
        declared(findings, analysis.reports)  # a fix the rule withholds is not offered
    return next(f for f in findings if f.code == rule.code)


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_fix_availability_matches_what_the_examples_fix(rule):
    offered = [_first_finding(rule, example, []).fix is not None for example in examples_of(rule).invalid]
    expected = {"always": all(offered), "none": not any(offered), "sometimes": any(offered) and not all(offered)}
    assert expected[rule.fix_availability], f"{rule.code} is {rule.fix_availability!r} but fixes {offered}"


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_rules_that_declare_the_profile_read_it(rule):
    # The converse is enforced by Context: a rule that did not declare it
    # raises ProfileNotDeclared, and every example runs in test_rules.
    reads: list[int] = []
    for example in examples_of(rule).invalid:
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
        Reader().check(Context(facts, RuleSettings(EXAMPLE_PROFILE), hardware=False))
    assert list(Reader().check(Context(facts, RuleSettings(EXAMPLE_PROFILE), hardware=True))) == []


def test_worker_hazards_are_the_rules_that_declare_them():
    assert [type(rule).code for rule in hazard_rules()] == ["LL007", "LL012", "LL014", "LL105", "LL104", "LL103"]


def test_the_rules_across_files_are_those_with_a_project_hook():
    hooked = {rule.code for rule in all_rules() if rule.check_project is not Rule.check_project}
    assert hooked == {"LL013", "LL014", "LL102", "LL202", "LL204", "LL205", "LL207"}
    # Derived from the hook, and found from the modules' text without importing the others.
    assert {rule.code for rule in all_rules() if rule.across_files} == hooked
    assert [type(rule).code for rule in project_rules()] == sorted(hooked)


def test_the_rules_that_revise_their_own_findings_across_files():
    revising = {rule.code for rule in all_rules() if rule.revise_own is not Rule.revise_own}
    assert revising == {"LL013", "LL201"}
    assert [type(rule).code for rule in revising_rules()] == sorted(revising)
    # Revising its own findings does not make a rule's findings cross-file ones.
    assert not rule_class("LL201").across_files


def test_a_class_that_sets_across_files_without_a_hook_is_not_across_files():
    class Claims(Rule):
        code, name, summary = "LL998", "claims", "says it is across files"
        across_files = True

        def check(self, ctx):
            return iter(())

    class Hooked(Claims):
        def check_project(self, project):
            return iter(())

    assert (Claims.across_files, Hooked.across_files) == (False, True)


def test_the_project_package_words_no_rule_finding():
    """The project joins; each verdict and message is its rule's hook's
    (``check_project``, ``revise_own``).  What is left names a code only
    for the phase's own work: LL900 where it stopped short."""
    project = RULES_DIR.parent / "project"
    named = {code for path in project.glob("*.py") for code in re.findall(r'"(LL\d{3})"', path.read_text(encoding="utf-8"))}
    assert named == {"LL900"}
    worded = {code for path in project.glob("*.py")
              for code in re.findall(r'Finding\("(LL\d{3})", [^,]+, (?!"")', path.read_text(encoding="utf-8"))}
    assert worded == {"LL900"}


#: What only the facts layer may do: resolve values, walk nodes, match them.
_FACTS_ONLY_MODULES = ("loadlint.facts.resolve", "loadlint.cst.walk", "libcst.matchers")
#: (libcst's matchers are caught at their import.)
_WALKS = frozenset({"find_all", "walk", "visit"})


def _reads_facts_itself(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            names = []
        found += [f"line {node.lineno}: imports {name}" for name in names if name.startswith(_FACTS_ONLY_MODULES)]
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in _WALKS:
                found.append(f"line {node.lineno}: calls {called}")
    return found


def test_rules_read_facts_only_through_the_context():
    # base.py is the Context, the one way in: every other module of the
    # rules package asks it (or a fact provider) instead of walking nodes or
    # resolving expressions itself.
    modules = sorted(p for p in RULES_DIR.glob("*.py") if p.name != "base.py")
    assert len(modules) > len(CODES)
    found = {p.name: v for p in modules if (v := _reads_facts_itself(p.read_text(encoding="utf-8")))}
    assert found == {}


@pytest.mark.parametrize("source", [
    "from loadlint.facts.resolve import evaluate",
    "import loadlint.facts.resolve",
    "def f():\n    from loadlint.facts import resolve",
    "import libcst.matchers as m",
    "from loadlint.cst.walk import find_all",
    "x = [n for n in find_all(node, cst.Call)]",
    "node.visit(Collector())",
])
def test_the_check_sees_a_rule_reading_facts_itself(source):
    assert _reads_facts_itself(source)
