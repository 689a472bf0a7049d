"""Step 6b: the fix decision, which of a text's fixes apply.

Each fix is tried on the text: the result must parse (as far as the
original did) and gain no finding of any code, every rule running for the
comparison (``guard_options``); a fix that would add one is withheld, with
the finding as its reason (``loadlint.engine.withhold`` picks the trials).
``fix_text`` applies what is kept, round after round; ``decided_findings``
gives ``check`` the same markers without changing the text.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING, AbstractSet, Callable

from loadlint.rules import CODES, codes_where, rule_class
from loadlint.cst import slicing
from loadlint.cst.slicing import Slice
from loadlint.cst.syntax import compile_alone, too_deep_at
from loadlint.sources.source import line_starts
from loadlint.engine.analysis import LL902, Analysis, analyse, run_rules, sliced
from loadlint.types import Applied, Finding, Options, Summary
from loadlint.engine.withhold import Candidate, Decision, Outcome, decide, declared, group_key, offered, withhold

if TYPE_CHECKING:
    import libcst

    from loadlint.rules.base import FixSpec


def crash_codes() -> frozenset[str]:
    """Codes whose findings mean the program would crash or fail to parse:
    a fix must never add one."""
    return codes_where(breaks_program=True)


def implied(code: str) -> bool:
    """Whether a finding of ``code`` that a fix introduces may be left to
    that rule's own fix in the next round (``Rule.implied_fix``)."""
    return code not in CODES or rule_class(code).implied_fix


class FixFailed(Exception):
    """Fixing a file failed; it is left untouched."""


#: A source of fixes for one round: given the text and its analysis (None
#: when nothing was parsed), the (label, FixSpec) pairs to apply.
SpecSource = Callable[[str, "Analysis | None"], "Chosen"]
#: Fixes picked for a round: (label for --show-fixes, FixSpec) pairs.
Chosen = list[tuple[str, "FixSpec"]]


def fix_text(
    text: str, path: str, options: Options, *, unsafe: bool, external: SpecSource | None = None, notebook: bool = False,
    skip: AbstractSet[tuple[str, int, int]] = frozenset(), summaries: list[Summary] | None = None,
) -> tuple[str, list[Finding], dict[str, int]]:
    """Apply fixes until none applies; return (new text, remaining findings, applied counts).

    Each round applies the applicable fixes at once, in one set of edits
    (changes to one call merged).  The result must parse (else ``FixFailed``
    is raised and nothing is kept) and must not gain a finding of any code
    (every rule runs for the comparison, selected or not): a fix that would
    add one is withheld, the other fixes of its call and file still apply
    (``loadlint.engine.withhold``).  The remaining findings carry only the fixes a
    further run would apply; a withheld one says why (``fix_withheld``).

    ``external`` replaces the rules' fixes by other ones (``--from-verify``),
    applied in one round, all or nothing, crash findings the veto.
    ``notebook`` analyses the text as a notebook's joined cells.
    ``skip``: the (code, row, column) of findings whose fixes are not applied.
    ``summaries`` receives the new text's project summary when it was parsed
    whole (the project phase then need not parse it again).
    """
    guard = guard_options(options)
    if external is not None:
        return _fix_external(text, path, options, guard, external, notebook)
    applied = Applied()
    all_findings, analysis = analyse(text, path, guard, notebook=notebook)
    original_compiles = compiles(text, path)
    settled = False
    for round_ in range(8):
        if analysis is None:
            break
        candidates = offered(all_findings, analysis.reports, options.select, unsafe)
        if skip:
            candidates = [c for c in candidates if _place(all_findings[c.index]) not in skip]
        if not candidates:
            settled = unsafe
            break
        decision = _decide(text, path, guard, analysis, candidates, unsafe, notebook, original_compiles)
        outcome = decision.outcome
        if outcome is None or outcome.text == text:
            withhold(all_findings, decision.withheld)
            settled = unsafe
            break
        for candidate in decision.kept:
            applied[candidate.label] = applied.get(candidate.label, 0) + 1
        if round_:
            applied.later += len(decision.kept)
        text, all_findings, analysis = outcome.text, outcome.findings, outcome.analysis
    if summaries is not None and analysis is not None and analysis.positions.piece is None:
        from loadlint.facts.summary import Numbering, summarise

        # Before ``_decided``, whose trials patch the facts; a large text's
        # summary is the project phase's to make (it reads such a module only in part).
        if len(text) <= slicing.SLICE_ABOVE:
            summaries.append(summarise(analysis.info, Numbering()))
    if not settled:
        # What a further run (or ``check``) would say about the fixes left.
        all_findings = _decided(text, path, options, guard, all_findings, analysis, notebook)
    elif analysis is not None:
        declared(all_findings, analysis.reports)
    return text, [f for f in all_findings if f.code in options.select], applied


def _place(finding: Finding) -> tuple[str, int, int]:
    return finding.code, finding.location.row, finding.location.column


def guard_options(options: Options) -> Options:
    """The options of the comparison: every rule runs, selected or not."""
    return Options(options.select | frozenset(CODES) | crash_codes(), options.profile_factory, options.noqa)


def decided_findings(
    text: str, path: str, options: Options, *, notebook: bool = False, summaries: list[Summary] | None = None,
    analysed: tuple[list[Finding], Analysis | None] | None = None,
) -> list[Finding]:
    """``analyse``'s findings, with the fix markers ``fix`` honours: a fix
    that would introduce a finding is withheld, with its reason.  The
    comparison needs every rule; unselected ones run only for files with a
    fix (on the same tree).  ``summaries`` as in ``analyse``; ``analysed``:
    what ``analyse`` gave for ``text`` and ``options`` (an editor shows
    those findings first and decides fixes when asked for them), left as it is."""
    guard = guard_options(options)
    first = None if analysed is None else analysed[1]
    if guard.select != options.select:
        findings, first = analysed or analyse(text, path, options, notebook=notebook, summaries=summaries)
        if not any(f.fix is not None for f in findings):
            return findings
        summaries = None  # the first pass filled it
    if LL902 not in options.select:
        # No trial of a check judges ``# noqa`` comments (``against``): unselected, LL902 is only dropped.
        guard = Options(guard.select - {LL902}, guard.profile_factory, guard.noqa)
    # Only the selected findings' fixes are offered: the others' are not rendered.
    all_findings, analysis = analyse(text, path, guard, notebook=notebook, summaries=summaries, parsed=first,
                                     render=options.select)
    all_findings = _decided(text, path, options, guard, all_findings, analysis, notebook)
    return [f for f in all_findings if f.code in options.select]


def _decided(
    text: str, path: str, options: Options, guard: Options, all_findings: list[Finding],
    analysis: Analysis | None, notebook: bool,
) -> list[Finding]:
    if analysis is None:
        return all_findings
    declared(all_findings, analysis.reports)
    candidates = offered(all_findings, analysis.reports, options.select, True)
    if candidates:
        decision = _decide(text, path, guard, analysis, candidates, True, notebook, None, check=True)
        withhold(all_findings, decision.withheld)
    return all_findings


def _decide(
    text: str, path: str, guard: Options, analysis: Analysis, candidates: list[Candidate],
    unsafe: bool, notebook: bool, original_compiles: bool | None, *, check: bool = False,
) -> Decision[Analysis | None]:
    """What ``decide`` keeps of ``candidates``.  ``check``: only what is
    withheld is wanted, not the fixed text's analysis; a trial then finds
    only the findings that may be new (see ``analyse``'s ``against``); ``original_compiles`` None: not known yet."""
    from loadlint.engine.fixes import Builder, apply_edits, old_offset
    from loadlint.engine.positions import Positions
    from loadlint.engine.positions import reparse
    from loadlint.engine.virtual import Unlocated, patched

    positions = analysis.positions
    assert isinstance(positions, Positions)
    builder = Builder(positions.module, positions)

    def trial(chosen: list[Candidate]) -> Outcome[Analysis | None] | None:
        simulated = patched(analysis.info, [c.spec for c in chosen], text) if check else None
        if simulated is not None:
            again = Analysis(text, analysis.module, analysis.positions, simulated[0], rendered=analysis.rendered)
            try:
                if run_rules(again, path, guard, notebook, analysis.findings, simulated[1]):
                    return Outcome(text, again.findings, None)
            except Unlocated:
                pass
        try:
            edits = builder.edits([c.spec for c in chosen])
            new_text = apply_edits(text, edits)
        except Exception:  # edits that cannot be rendered together
            return None
        if new_text == text:
            return Outcome(text, analysis.findings, analysis)
        bounds = positions.bounds
        # Only the statements the edits touch are parsed again (see ``reparse``).
        chunks: list[str] = []
        module = None if bounds is None else reparse(positions.module, text, bounds, edits, new_text, chunks)
        nonlocal original_compiles
        if module is not None and compile_alone(new_text, chunks):
            # The statements edited compile: the text does, as far as the original did.
            parsed = check_parses(new_text, path, False, module)
        else:
            if original_compiles is None:  # only a real trial needs it: compiling a big text is slow
                original_compiles = compiles(text, path)
            parsed = check_parses(new_text, path, original_compiles, module)
        # The text nested within the limit: only the statements edited need the scan.
        shallow = module is not None and bounds is not None and too_deep_at(
            new_text[bounds[bisect_right(bounds, edits[0].start) - 1] : len(new_text) - len(text) + bounds[bisect_right(bounds, edits[-1].start)]]
        ) is None
        if check:
            found = analyse(new_text, path, guard, notebook=notebook, parsed=parsed, against=analysis.findings, shallow=shallow)
            return Outcome(new_text, found[0], None)
        findings, new_analysis = analyse(new_text, path, guard, notebook=notebook, parsed=parsed, shallow=shallow)
        return Outcome(new_text, findings, new_analysis)

    def fixable(finding: Finding) -> bool:
        return (finding.fix is not None and finding.code in guard.select and (unsafe or finding.fix.applicability == "safe")
                and implied(finding.code))

    def blame(chosen: list[Candidate], outcome: Outcome[Analysis | None], codes: set[str]) -> set[int] | None:
        if any(not c.spec.calls for c in chosen):
            return None
        calls = {group_key(c.spec): c.spec.calls[0].call for c in chosen}
        try:
            spans = {key: positions.span(call)[:2] for key, call in calls.items()}
            # A simulated trial's findings are located in the text as it is.
            edits = [] if outcome.text is text else sorted(builder.edits([c.spec for c in chosen]), key=lambda e: e.start)
        except Exception:  # blame only saves trials: without it, each call is tried
            return None
        starts = line_starts(outcome.text)
        blamed: set[int] = set()
        for finding in outcome.findings:
            if finding.code in codes:
                if finding.location.row > len(starts):
                    return None
                at = old_offset(edits, starts[finding.location.row - 1] + finding.location.column - 1)
                hit = {key for key, (start, end) in spans.items() if start <= at < end}
                if not hit:
                    return None
                blamed |= hit
        return blamed

    return decide(candidates, trial, analysis.findings, fixable, blame)


def _fix_external(
    text: str, path: str, options: Options, guard: Options, external: SpecSource, notebook: bool
) -> tuple[str, list[Finding], dict[str, int]]:
    from loadlint.engine.fixes import Builder, FixError, apply_edits

    from loadlint.engine.positions import Positions
    all_findings, analysis = analyse(text, path, guard, notebook=notebook)
    try:
        chosen = external(text, analysis)
    except FixError as exc:
        raise FixFailed(str(exc)) from None
    if not chosen:
        return text, [f for f in all_findings if f.code in options.select], {}
    if analysis is not None and isinstance(analysis.positions, Positions):
        positions = analysis.positions
    else:
        positions = Positions(slicing.parse_module(text), text)
    builder = Builder(positions.module, positions)
    kept: Chosen = []
    for item in chosen:
        try:
            builder.edits([s for _, s in kept] + [item[1]])
        except Exception:
            continue
        kept.append(item)
    if len(kept) < len(chosen):
        # Asked for explicitly: all of it or nothing.
        missing = [spec.message for item in chosen if not any(item is k for k in kept) for spec in item[1:]]
        raise FixFailed(f"cannot apply: {'; '.join(missing)}; file left unchanged")
    new_text = apply_edits(text, builder.edits([s for _, s in kept]))
    if new_text == text:
        return text, [f for f in all_findings if f.code in options.select], {}
    parsed = check_parses(new_text, path, compiles(text, path))
    new_all, _ = analyse(new_text, path, guard, notebook=notebook, parsed=parsed)
    check_no_new_crash(all_findings, new_all)
    applied: dict[str, int] = {}
    for label, _ in kept:
        applied[label] = applied.get(label, 0) + 1
    return new_text, [f for f in new_all if f.code in options.select], applied


def compiles(text: str, path: str) -> bool:
    from loadlint.cst.rows import python_tree

    # Python's grammar judges top-level statements one by one and the slicer kept the first dropped one it
    # rejects: the kept ones answer for a huge table without its syntax tree.
    piece = sliced(text)
    return python_tree(text if piece is None or piece.too_large or "barry_as_FLUFL" in text else piece.blanked())[1]


def check_parses(
    text: str, path: str, original_compiles: bool, module: libcst.Module | None = None,
) -> tuple[libcst.Module, Slice | None] | None:
    """Raises FixFailed unless ``text`` parses; the tree, for ``analyse``
    (``module``: the tree of ``text`` when the caller has it)."""
    parsed: tuple[libcst.Module, Slice | None] | None = None
    try:
        # A large module as ``analyse`` parses it: its other statements are
        # checked by Python's parser (a fix on a megabyte must not take minutes).
        piece = sliced(text)
        if module is not None and piece is None:
            parsed = module, None
        elif piece is None or not piece.too_large:
            parsed = slicing.parse(text, piece)
    except Exception as exc:
        raise FixFailed(f"fixed code does not parse ({type(exc).__name__}); file left unchanged") from None
    # libcst accepts some code Python rejects; hold the result to Python's
    # standard whenever the original met it.
    if original_compiles and not compiles(text, path):
        raise FixFailed("fixed code is not valid Python; file left unchanged")
    return parsed


def check_no_new_crash(before: list[Finding], after: list[Finding]) -> None:
    crash = crash_codes()
    counts: dict[str, int] = {}
    for finding in before:
        if finding.code in crash:
            counts[finding.code] = counts.get(finding.code, 0) + 1
    for finding in after:
        if finding.code not in crash:
            continue
        counts[finding.code] = counts.get(finding.code, 0) - 1
        if counts[finding.code] < 0:
            raise FixFailed(
                f"fixing would introduce {finding.code} at line {finding.location.row} "
                f"({finding.message}); file left unchanged"
            )
