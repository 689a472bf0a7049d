"""Step 5: rules × call sites × hardware profile → findings (and fixes).

``analyse`` is the heart: pre-filter, one parse, one collection pass, the
selected rules, suppression comments; unparsable or too deeply nested text
is LL900.  What is done with the findings' fixes is the fix decision's
(``loadlint.engine.decision``); a file's bytes are read by
``loadlint.engine.pipeline.lint_bytes``.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AbstractSet, Any, TypeAlias

from loadlint.rules import CODES, codes_where, name_of, rule_class
from loadlint.cst import slicing
from loadlint.cst.slicing import Slice
from loadlint.cst.syntax import MAX_NESTING
from loadlint.sources.prefilter import may_construct_loader
from loadlint.cst.syntax import interpreter_error, syntax_error
from loadlint.cst.syntax import too_deep_at
from loadlint.sources.source import position_of_offset
from loadlint.engine.suppress import file_suppressions, is_suppressed
from loadlint.types import Descriptor, Finding, Fix, Location, Options, Summary

if TYPE_CHECKING:
    import libcst

    from loadlint.facts.collect import ModuleFacts
    from loadlint.engine.positions import Positions
    from loadlint.rules.base import Report

#: Unused or invalid ``# noqa`` codes (``loadlint.engine.noqa``), judged after the rules ran.
LL902 = "LL902"


def engine_finding(code: str, message: str, path: str, row: int = 1, column: int = 1) -> Finding:
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
            return [engine_finding("LL900", message, path, row, column)], None
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
        return [engine_finding("LL900", message, path, row, column)], None
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
        return [engine_finding("LL900", f"SyntaxError: {exc}", path, row, column)], None
    except UnicodeEncodeError as exc:
        # Only text that never was a file's bytes (a notebook's JSON
        # escapes, an editor's buffer) can hold a lone surrogate.
        if "LL901" not in options.select:
            return [], None
        read = text if piece is None else piece.text
        row, column = position_of_offset(read, exc.start)
        row = row if piece is None else piece.row(row)
        message = f"cannot read source: U+{ord(read[exc.start]):04X} (a lone surrogate) is not valid Unicode"
        return [engine_finding("LL901", message, path, row, column)], None
    try:
        # The facts do not depend on the selection: an earlier pass's serve.
        info = parsed.info if isinstance(parsed, Analysis) else collect(module, text)
        if summaries is not None:
            from loadlint.facts.summary import Numbering, summarise

            summaries.append(summarise(info, Numbering()))
    except RecursionError:
        return _too_deep(path, options), None
    if bindings:
        from loadlint.facts.inject import inject

        inject(info, bindings)
    if not info.calls and not info.launch.samplers and not info.cli.training_arguments:
        return [], None

    positions = parsed.positions if isinstance(parsed, Analysis) else Positions(module, text, piece, info.units)
    analysis = Analysis(text, module, positions, info)
    if isinstance(parsed, Analysis):
        analysis.rendered = parsed.rendered
    if not run_rules(analysis, path, options, notebook, against, render=render):
        return _too_deep(path, options), None
    return analysis.findings, analysis


def run_rules(
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
    return [engine_finding("LL900", message, path)]


def _unrepr(text: str) -> str:
    try:
        value = ast.literal_eval(f"'{text}'")
    except (ValueError, SyntaxError):
        return text
    return value if isinstance(value, str) else text


def _too_deep(path: str, options: Options) -> list[Finding]:
    if "LL900" not in options.select:
        return []
    return [engine_finding("LL900", "file too complex to analyse: nesting exceeds the recursion limit", path)]
