"""Step 5: rules × call sites × hardware profile → findings (and fixes).

``analyse`` is the heart: pre-filter, one parse, one collection pass, the
selected rules, suppression comments; unparsable or too deeply nested text
is LL900.  ``lint_bytes`` wraps it for a file's bytes: undecodable bytes
are LL901, and an unexpected error inside a rule becomes the file's error
message rather than aborting the run over other files.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AbstractSet, Any, Callable, TypeAlias

from loadlint.rules import CODES, codes_where, name_of, rule_class
from loadlint.cst import slicing
from loadlint.cst.slicing import Slice
from loadlint.cst.syntax import MAX_NESTING
from loadlint.sources.prefilter import PREFILTER
from loadlint.sources.prefilter import may_construct_loader
from loadlint.sources.prefilter import passes_prefilter, undecodable
from loadlint.cst.syntax import compile_alone, interpreter_error, syntax_error
from loadlint.cst.syntax import too_deep_at
from loadlint.cst.syntax import nesting_depth
from loadlint.sources.source import DecodeError, decode, line_starts, position_of_offset
from loadlint.engine.suppress import file_suppressions, is_suppressed
from loadlint.types import Applied, Descriptor, FileResult, Finding, Fix, Location, Options, Summary
from loadlint.engine.withhold import Candidate, Decision, Outcome, decide, declared, group_key, offered, withhold

if TYPE_CHECKING:
    import libcst

    from loadlint.facts.collect import ModuleFacts
    from loadlint.engine.positions import Positions
    from loadlint.rules.base import FixSpec, Report

#: Unused or invalid ``# noqa`` codes (``loadlint.engine.noqa``), judged after the rules ran.
LL902 = "LL902"


def _engine_finding(code: str, message: str, path: str, row: int = 1, column: int = 1) -> Finding:
    return Finding(code, name_of(code), message, path, Location(row, column), Location(row, column + 1))


@dataclass
class Analysis:
    """Everything one pass produced, kept for building fixes."""

    text: str
    module: libcst.Module
    positions: Positions
    #: The module's facts, as the rules read them.
    info: ModuleFacts
    #: (code, report) of each finding, in the order of ``findings``.
    reports: list[tuple[str, Report]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    #: Fixes rendered for this tree: (code, node id, fix message) -> fix
    #: (a later pass over the same tree, with more rules, reuses them).
    rendered: dict[tuple[str, int, str], Fix | None] = field(default_factory=dict)


#: A text's tree, parsed already: the module and the slice it holds, or an analysis of it.
Parsed: TypeAlias = "tuple[libcst.Module, Slice | None] | Analysis"

#: Values a project's callers give a module's function parameters:
#: function (``name`` or ``Class.method``) -> parameter -> value descriptor
#: (``loadlint.facts.summary``; ``{"default": true}`` for the parameter's default).
Bindings = dict[str, dict[str, Descriptor]]


def analyse(
    text: str, path: str, options: Options, *, notebook: bool = False, bindings: Bindings | None = None,
    summaries: list[Summary] | None = None, parsed: Parsed | None = None, against: list[Finding] | None = None,
    shallow: bool = False, render: AbstractSet[str] | None = None,
) -> tuple[list[Finding], Analysis | None]:
    """Lint one module's text: findings and, when parsed, the analysis.
    ``bindings`` gives parameters the values a caller passes (as if assigned
    in the function); ``summaries`` receives the module's project summary;
    ``parsed`` is the text's tree when the caller has it (an analysis: its
    positions are reused too).  ``against``: the findings of the text before
    a fix; only the findings of codes that occur more often than there are
    kept (and located, their fixes rendered): no other can be new.
    ``shallow``: the text, if parsed whole, is known to nest within ``MAX_NESTING``.
    ``render``: the codes whose fixes are rendered (None: all); the others' findings carry none."""
    if not may_construct_loader(text):
        return [], None
    # An analysis of this text passed the scan already.
    shallow = shallow or isinstance(parsed, Analysis) and parsed.text == text
    piece = sliced(text)
    # A statement can nest no deeper than it is long: dropped short ones need no scan.
    at = None if shallow and piece is None else too_deep_at(text if piece is None else piece.blanked(longer_than=MAX_NESTING))
    if at is not None:
        if "LL900" in options.select:
            row, column = at
            message = f"file too complex to analyse: expressions nested more than {MAX_NESTING} deep"
            return [_engine_finding("LL900", message, path, row, column)], None
        return [], None

    if piece is not None and piece.too_large:
        return _too_large(piece, path, options), None

    import libcst as cst

    from loadlint.facts.collect import collect
    from loadlint.engine.positions import Positions

    try:
        if isinstance(parsed, Analysis):
            module, piece = parsed.module, parsed.positions.piece
        else:
            module, piece = slicing.parse(text, piece) if parsed is None else parsed
    except cst.ParserSyntaxError as exc:
        if "LL900" not in options.select:
            return [], None
        # Compiled only now: a file that parses pays nothing for the interpreter's opinion.
        message, row, column = syntax_error(text, exc, interpreter_error(text, top_level_await=notebook))
        return [_engine_finding("LL900", message, path, row, column)], None
    except RecursionError:
        return _too_deep(path, options), None
    except cst.CSTValidationError as exc:
        # The tokenizer accepted what Python's own rules reject, e.g. an
        # identifier in a script newer than this Python's Unicode tables.
        if "LL900" not in options.select:
            return [], None
        name = re.search(r"'(.*)'", str(exc))
        offset = text.find(_unrepr(name.group(1))) if name else -1
        row, column = position_of_offset(text, offset) if offset >= 0 else (1, 1)
        return [_engine_finding("LL900", f"SyntaxError: {exc}", path, row, column)], None
    except UnicodeEncodeError as exc:
        # Only text that never was a file's bytes (a notebook's JSON
        # escapes, an editor's buffer) can hold a lone surrogate.
        if "LL901" not in options.select:
            return [], None
        read = text if piece is None else piece.text
        row, column = position_of_offset(read, exc.start)
        row = row if piece is None else piece.row(row)
        message = f"cannot read source: U+{ord(read[exc.start]):04X} (a lone surrogate) is not valid Unicode"
        return [_engine_finding("LL901", message, path, row, column)], None
    try:
        # The facts do not depend on the selection: an earlier pass's serve.
        info = parsed.info if isinstance(parsed, Analysis) else collect(module, text)
        if summaries is not None:
            from loadlint.facts.summary import Numbering, summarise

            summaries.append(summarise(info, Numbering()))
    except RecursionError:
        return _too_deep(path, options), None
    if bindings:
        from loadlint.facts.summary import inject

        inject(info, bindings)
    if not info.calls and not info.launch.samplers and not info.cli.training_arguments:
        return [], None

    positions = parsed.positions if isinstance(parsed, Analysis) else Positions(module, text, piece, info.units)
    analysis = Analysis(text, module, positions, info)
    if isinstance(parsed, Analysis):
        analysis.rendered = parsed.rendered
    if not _run_rules(analysis, path, options, notebook, against, render=render):
        return _too_deep(path, options), None
    return analysis.findings, analysis


def _run_rules(
    analysis: Analysis, path: str, options: Options, notebook: bool, against: list[Finding] | None,
    made: AbstractSet[int] = frozenset(), render: AbstractSet[str] | None = None,
) -> bool:
    """Fill ``analysis.findings`` and ``reports`` (see ``analyse``); False
    when the tree is too deep to locate or render them.  ``made``: ids of
    nodes the facts hold but the text does not (``loadlint.engine.virtual``): a
    report on one raises ``Unlocated``."""
    from loadlint.engine.fixes import Builder
    from loadlint.rules.base import Context, RuleSettings
    from loadlint.engine.virtual import Unlocated

    info, positions, text = analysis.info, analysis.positions, analysis.text
    settings = RuleSettings(options.profile)
    # A rule reads the profile only if it declares so (detection is lazy).
    contexts = {flag: Context(info, settings, path, notebook, hardware=flag) for flag in (False, True)}
    if "loadlint: measured" in text:  # fix --from-verify's mark: the rules that guess defer to it
        marks = {id(c.node): m for c in info.loaders.calls if (m := _measured_at(positions, c.node))}
        for ctx in contexts.values():
            ctx.measured = marks
    builder = Builder(analysis.module, positions)
    file_level = file_suppressions(text)
    pairs: list[tuple[Finding, tuple[str, Report]]] = []
    reports: list[tuple[str, str, Report]] = []
    engine = codes_where(engine=True)
    try:
        for code in sorted(options.select):
            if code not in CODES or code in engine:
                continue
            rule = rule_class(code)()
            reports.extend((code, rule.name, report) for report in rule.check(contexts[rule.needs_hardware]))
        if against is not None:
            more = Counter(code for code, _, _ in reports)
            more.subtract(f.code for f in against)
            reports = [r for r in reports if more[r[0]] > 0]
        found = {(positions.range(report.node)[0].row, code) for code, _, report in reports if id(report.node) not in made}
        if against is None and options.noqa and LL902 in options.select and "noqa" in text:
            from loadlint.engine.noqa import unused_noqa

            row = lambda node: positions.range(node)[0].row  # noqa: E731
            reports += [(LL902, name_of(LL902), r) for r in unused_noqa(analysis.module, row, found, options.select)]
        for code, rule_name, report in reports:
            if id(report.node) in made:
                raise Unlocated(code)
            start, end = positions.range(report.node)
            fix: Fix | None = None
            if report.fix is not None and (render is None or code in render):
                key = (code, id(report.node), report.fix.message)
                if key in analysis.rendered:
                    fix = analysis.rendered[key]
                else:
                    try:
                        fix = builder.build(report.fix)
                    except Exception:  # an unrenderable fix must not lose the finding
                        fix = None
                    analysis.rendered[key] = fix
            finding = Finding(code, rule_name, report.message, path, start, end, fix)
            # The reported line only: splitting the whole text per finding
            # made suppression quadratic in big files.
            if options.noqa and is_suppressed(finding, positions.line_text(start.row), file_level):
                continue
            pairs.append((finding, (code, report)))
    except RecursionError:
        # Positions and fix rendering walk the tree recursively too.
        return False
    pairs.sort(key=lambda p: (p[0].location.row, p[0].location.column, p[0].code))
    analysis.findings = [f for f, _ in pairs]
    analysis.reports = [r for _, r in pairs]
    return True


def _measured_at(positions: Positions, node: libcst.CSTNode) -> Any:
    """The measured mark on one of the lines a call spans, if any."""
    from loadlint.rules.base import Measured

    start, end = positions.range(node)
    return next((m for row in range(start.row, end.row + 1) if (m := Measured.parse(positions.line_text(row)))), None)


def sliced(text: str) -> Slice | None:
    """The statements of ``text`` to parse when it is too long to parse
    whole (see ``loadlint.cst.slicing``); None to parse all of it."""
    return slicing.slice_module(text) if len(text) > slicing.SLICE_ABOVE else None


def _too_large(piece: Slice, path: str, options: Options) -> list[Finding]:
    if "LL900" not in options.select:
        return []
    message = (
        f"file too large to analyse: {piece.size:,} characters, {piece.kept:,} of them in statements that can "
        f"reach a DataLoader (at most {slicing.MAX_PARSE:,} are parsed); split the module or exclude it"
    )
    return [_engine_finding("LL900", message, path)]


def _unrepr(text: str) -> str:
    try:
        value = ast.literal_eval(f"'{text}'")
    except (ValueError, SyntaxError):
        return text
    return value if isinstance(value, str) else text


def _too_deep(path: str, options: Options) -> list[Finding]:
    if "LL900" not in options.select:
        return []
    return [_engine_finding("LL900", "file too complex to analyse: nesting exceeds the recursion limit", path)]


def lint_bytes(data: bytes, path: str, options: Options) -> FileResult:
    """Check a file's bytes: pre-filter, decode (LL901 when that fails), analyse."""
    result = FileResult(path)
    if not passes_prefilter(data) and not undecodable(data):
        return result
    try:
        source = decode(data)
    except DecodeError as exc:
        if "LL901" in options.select:
            result.findings.append(_engine_finding("LL901", f"cannot read file: {exc}", path, exc.row, exc.column))
        return result
    result.source = source
    try:
        summaries: list[Summary] = []
        result.findings = decided_findings(source.text, path, options, summaries=summaries)
        result.summary = summaries[0] if summaries else None
    except Exception as exc:  # the engine never crashes on one file
        result.error = f"internal error while checking: {type(exc).__name__}: {exc}"
    return result


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
    skip: AbstractSet[tuple[str, int, int]] = frozenset(),
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
    """
    guard = _guard(options)
    if external is not None:
        return _fix_external(text, path, options, guard, external, notebook)
    applied = Applied()
    all_findings, analysis = analyse(text, path, guard, notebook=notebook)
    original_compiles = _compiles(text, path)
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
    if not settled:
        # What a further run (or ``check``) would say about the fixes left.
        all_findings = _decided(text, path, options, guard, all_findings, analysis, notebook)
    elif analysis is not None:
        declared(all_findings, analysis.reports)
    return text, [f for f in all_findings if f.code in options.select], applied


def _place(finding: Finding) -> tuple[str, int, int]:
    return finding.code, finding.location.row, finding.location.column


def _guard(options: Options) -> Options:
    return guard_options(options)


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
    guard = _guard(options)
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
                if _run_rules(again, path, guard, notebook, analysis.findings, simulated[1]):
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
            parsed = _check_parses(new_text, path, False, module)
        else:
            if original_compiles is None:  # only a real trial needs it: compiling a big text is slow
                original_compiles = _compiles(text, path)
            parsed = _check_parses(new_text, path, original_compiles, module)
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
    parsed = _check_parses(new_text, path, _compiles(text, path))
    new_all, _ = analyse(new_text, path, guard, notebook=notebook, parsed=parsed)
    _check_no_new_crash(all_findings, new_all)
    applied: dict[str, int] = {}
    for label, _ in kept:
        applied[label] = applied.get(label, 0) + 1
    return new_text, [f for f in new_all if f.code in options.select], applied


def _compiles(text: str, path: str) -> bool:
    from loadlint.cst.walk import python_tree

    # Python's grammar judges top-level statements one by one and the slicer kept the first dropped one it
    # rejects: the kept ones answer for a huge table without its syntax tree.
    piece = sliced(text)
    return python_tree(text if piece is None or piece.too_large or "barry_as_FLUFL" in text else piece.blanked())[1]


def _check_parses(
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
    if original_compiles and not _compiles(text, path):
        raise FixFailed("fixed code is not valid Python; file left unchanged")
    return parsed


def _check_no_new_crash(before: list[Finding], after: list[Finding]) -> None:
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
