"""Runs each rule's VALID/INVALID examples (``loadlint.rules.examples``; the
tests are the examples, as in Fixit)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from loadlint.engine.analysis import analyse
from loadlint.engine.decision import fix_text

from loadlint.types import Options
from loadlint.rules import all_rules
from loadlint.rules.base import Invalid, Rule, Valid, dedent
from loadlint.rules.examples import examples_of
from loadlint.types import HardwareProfile

#: The profile examples run on unless they declare one: a small fully
#: declared machine, so expected messages never depend on the test host.
EXAMPLE_PROFILE = HardwareProfile(
    usable_cpus=2,
    gpu_count=0,
    platform="linux",
    python="3.11",
    declared=frozenset({"cpus", "gpus", "platform", "python", "memory", "shm"}),
)


@dataclass(frozen=True)
class Case:
    rule: type[Rule]
    kind: str
    index: int
    case: Valid | Invalid

    def __str__(self) -> str:
        return f"{self.rule.code}-{self.kind}-{self.index}"


def iter_cases() -> Iterator[Case]:
    """Every example of every rule."""
    for rule in all_rules():
        examples = examples_of(rule)
        for i, case in enumerate(examples.valid):
            yield Case(rule, "VALID", i, case)
        for i, invalid in enumerate(examples.invalid):
            yield Case(rule, "INVALID", i, invalid)


def example_options(rule: type[Rule], profile: HardwareProfile | None) -> Options:
    chosen = profile or EXAMPLE_PROFILE
    return Options(select=frozenset({rule.code}), profile_factory=lambda: chosen)


def run_case(case: Case) -> list[str]:
    """Problems with one example; empty when it behaves as declared."""
    rule, example = case.rule, case.case
    code = dedent(example.code)
    options = example_options(rule, example.profile)
    findings, _ = analyse(code, example.path, options, notebook=example.path.endswith(".ipynb"))
    findings = [f for f in findings if f.code == rule.code]
    problems = []
    if isinstance(example, Valid):
        if findings:
            problems.append(f"expected no finding, got: {[f.message for f in findings]}")
        return problems
    if len(findings) != example.count:
        problems.append(f"expected {example.count} finding(s), got {len(findings)}: {[f.message for f in findings]}")
        return problems
    if example.message is not None and findings[0].message != example.message:
        problems.append(f"message:\n  expected: {example.message}\n  got:      {findings[0].message}")
    if example.line is not None and findings[0].location.row != example.line:
        problems.append(f"line: expected {example.line}, got {findings[0].location.row}")
    if example.fixed is not None:
        fixed, remaining, _ = fix_text(code, example.path, options, unsafe=True)
        if fixed != dedent(example.fixed):
            problems.append(f"fix:\n--- expected\n{dedent(example.fixed)}--- got\n{fixed}")
        elif any(f.code == rule.code for f in remaining):
            problems.append("the fixed code still has the finding")
        again, _, _ = fix_text(fixed, example.path, options, unsafe=True)
        if again != fixed:
            problems.append("fixing is not idempotent")
    elif findings[0].fix is not None and fix_text(code, example.path, options, unsafe=True)[0] != code:
        # A fix the rule withholds (``FixSpec.withheld``) writes nothing.
        problems.append("a fix is applied but the example declares none")
    return problems
