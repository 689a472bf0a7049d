"""Which of a round's fixes may be applied: none may introduce a finding.

The fixes of one round are grouped by the call they change (the fix
builder merges the changes to one call into one edit).  When the round as a
whole would introduce a finding, each group is tried on top of the groups
already kept, with the largest subset of its fixes that introduces nothing;
the fixes left out are withheld, each with the finding it would introduce as
its reason.  One call's veto never costs another call its fixes.

A file with many calls would need a trial per call; when the round's trial
tells which calls hold its new findings (``Blame``), the other calls are
tried together first, so that usually only the blamed calls need trials of
their own.  Every kept set is still a trial that introduced nothing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar

from loadlint.rules import CODES, name_of
from loadlint.types import Finding

if TYPE_CHECKING:
    from loadlint.rules.base import FixSpec

#: What a trial carries beside its text and findings (the engine's analysis).
A = TypeVar("A")


@dataclass(frozen=True, eq=False)
class Candidate:
    """One finding's fix, offered to a round."""

    #: The finding's index among the round's findings.
    index: int
    #: What ``--show-fixes`` counts it as (the rule's code).
    label: str
    spec: FixSpec


@dataclass
class Outcome(Generic[A]):
    """Candidates applied together: the new text, its findings and analysis."""

    text: str
    findings: list[Finding]
    analysis: A


#: Applies candidates together; None when they cannot be rendered together.
Trial = Callable[[list[Candidate]], "Outcome[A] | None"]
#: Given a trial's candidates, its outcome and the codes it added, the group
#: keys (``group_key``) of the calls holding those codes' findings; None
#: when a finding of those codes lies outside every changed call.
Blame = Callable[[list[Candidate], "Outcome[A]", "set[str]"], "set[int] | None"]


@dataclass
class Decision(Generic[A]):
    """A round's verdict: what is applied (and its outcome), what is withheld and why."""

    kept: list[Candidate] = field(default_factory=list)
    outcome: Outcome[A] | None = None
    #: Finding index -> why its fix is withheld.
    withheld: dict[int, str] = field(default_factory=dict)


def introduced(before: list[Finding], after: list[Finding], fixable: Callable[[Finding], bool]) -> Finding | None:
    """The first finding of ``after`` whose code occurs more often than in
    ``before``.  A new finding the next round fixes (``fixable``), such as
    LL204 after workers were added, does not count."""
    left = Counter(f.code for f in before)
    for finding in after:
        if fixable(finding):
            continue
        left[finding.code] -= 1
        if left[finding.code] < 0:
            return finding
    return None


def added_codes(before: list[Finding], after: list[Finding], fixable: Callable[[Finding], bool]) -> set[str]:
    """Every code ``introduced`` could name."""
    left = Counter(f.code for f in before)
    left.subtract(f.code for f in after if not fixable(f))
    return {code for code, n in left.items() if n < 0}


def group_key(spec: FixSpec) -> int:
    """Fixes changing the same node are merged into one edit: they form a group."""
    for change in spec.calls:
        return id(change.call)
    for node, _ in [*spec.replace, *spec.prepend, *spec.hoist]:
        return id(node)
    for statement in spec.guard:
        return id(statement)
    return id(spec)


def subsets(group: list[Candidate]) -> list[list[Candidate]]:
    """Non-empty subsets of a group, largest first, then those with more safe fixes."""
    out = [list(c) for size in range(len(group), 0, -1) for c in combinations(group, size)]
    out.sort(key=lambda s: (-len(s), -sum(c.spec.applicability == "safe" for c in s)))
    return out


def decide(
    candidates: list[Candidate], trial: Trial[A], before: list[Finding], fixable: Callable[[Finding], bool],
    blame: Blame[A] | None = None,
) -> Decision[A]:
    """Keep as many candidates as introduce nothing together (see the module)."""
    # The same set is often tried twice (a one-fix group, then its reason).
    tried: dict[frozenset[int], tuple[Outcome[A] | None, Finding | None]] = {}

    def clean(chosen: list[Candidate]) -> tuple[Outcome[A] | None, Finding | None]:
        key = frozenset(id(c) for c in chosen)
        if key not in tried:
            outcome = trial(chosen)
            tried[key] = (None, None) if outcome is None else (outcome, introduced(before, outcome.findings, fixable))
        return tried[key]

    outcome, bad = clean(candidates)
    if outcome is not None and bad is None:
        return Decision(list(candidates), outcome)
    first = outcome
    decision: Decision[A] = Decision()
    groups: dict[int, list[Candidate]] = {}
    for candidate in candidates:
        groups.setdefault(group_key(candidate.spec), []).append(candidate)
    blamed = None if outcome is None or blame is None else blame(candidates, outcome, added_codes(before, outcome.findings, fixable))
    if blamed is not None and len(blamed) < len(groups):
        rest = [c for key, group in groups.items() if key not in blamed for c in group]
        outcome, bad = clean(rest)
        if outcome is not None and bad is None:
            decision.kept, decision.outcome = rest, outcome
            groups = {key: group for key, group in groups.items() if key in blamed}
    # Each trial costs about one analysis of the file, which grows with its
    # calls: fewer trials in a larger file keep the round about linear.
    budget = max(2, min(MAX_GROUP_TRIALS, TRIAL_WORK // max(1, len(candidates))))
    for group in groups.values():
        if budget <= 0:
            # Each trial analyses the whole file again: a file with hundreds
            # of calls whose fixes clash would take trials by the hundred.
            # The rest are withheld, which is always safe.
            codes = ", ".join(sorted(added_codes(before, first.findings, fixable))) if first is not None else ""
            for candidate in group:
                decision.withheld[candidate.index] = reason_untried(candidate.spec, codes, len(groups))
            continue
        budget -= 1
        for subset in subsets(group):
            outcome, bad = clean(decision.kept + subset)
            if outcome is not None and bad is None:
                decision.kept += subset
                decision.outcome = outcome
                break
        for candidate in group:
            if not any(candidate is k for k in decision.kept):
                _, bad = clean(decision.kept + [candidate])
                decision.withheld[candidate.index] = reason(candidate.spec, bad)
    return decision


#: Calls whose fixes are tried one by one in a round, at most.
MAX_GROUP_TRIALS = 16
#: Trials times the round's fixes, at most (a trial re-analyses every call).
TRIAL_WORK = 2000


def reason_untried(spec: FixSpec, codes: str, calls: int) -> str:
    """Why a fix beyond ``MAX_GROUP_TRIALS`` is withheld."""
    action = spec.message.split(" (unsafe:")[0]
    action = action[:1].lower() + action[1:]
    together = f" ({codes})" if codes else ""
    return (f"no fix: {action} would introduce findings{together} together with the other fixes, "
            f"and this file has too many such calls ({calls}) to try each alone")


def reason(spec: FixSpec, finding: Finding | None) -> str:
    """Why a fix is withheld, as its finding's help line says it."""
    action = spec.message.split(" (unsafe:")[0]
    action = action[:1].lower() + action[1:]
    if finding is None:
        return f"no fix: {action} cannot be applied together with the other fixes to this call"
    name = name_of(finding.code) if finding.code in CODES else finding.code
    return f"no fix: {action} would introduce {finding.code} ({name}): {finding.message}"


def withhold(findings: list[Finding], withheld: dict[int, str]) -> None:
    """Drop the withheld fixes from their findings and say why instead."""
    for index, why in withheld.items():
        findings[index].fix = None
        findings[index].fix_withheld = why


def declared(findings: list[Finding], reports: list[tuple[str, Any]]) -> None:
    """Withhold the fixes their rules declare withheld (``FixSpec.withheld``)."""
    for finding, (_, report) in zip(findings, reports):
        if finding.fix is not None and report.fix is not None and report.fix.withheld is not None:
            finding.fix = None
            finding.fix_withheld = report.fix.withheld


def offered(findings: list[Finding], reports: list[tuple[str, Any]], select: frozenset[str], unsafe: bool) -> list[Candidate]:
    """The round's candidates: the selected findings' fixes the mode allows."""
    return [
        Candidate(i, code, report.fix)
        for i, (finding, (code, report)) in enumerate(zip(findings, reports))
        if code in select
        and report.fix is not None
        and report.fix.withheld is None
        and finding.fix is not None
        and (unsafe or report.fix.applicability == "safe")
    ]
