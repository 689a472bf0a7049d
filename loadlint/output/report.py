"""Step 6b: findings to text.

Formatters take the whole run and return one string.  Machine-readable
formats never carry colour, progress or summaries.  ``render`` is the one
place a report is put together from the run's structured results: the
findings, ``--show-fixes``, and the summary lines (``--quiet`` drops them).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, TextIO

from loadlint.sources.files import unified_diff
from loadlint.rules import CODES, category_of, name_of
from loadlint.sources.source import lines as split_lines
from loadlint.sources.source import visible, visible_json, visible_lines
from loadlint.types import HUMAN_FORMATS, FileResult, Finding, Run


@dataclass
class Style:
    """ANSI styling, or none when colour is off."""

    color: bool = False

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def red(self, text: str) -> str:
        return self._wrap("1;31", text)

    def cyan(self, text: str) -> str:
        return self._wrap("36", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def blue(self, text: str) -> str:
        return self._wrap("1;34", text)


def use_color(choice: str, stream: TextIO | None = None) -> bool:
    """``--color``: never/always, or auto (a TTY, unless NO_COLOR; FORCE_COLOR forces)."""
    if choice == "never":
        return False
    if choice == "always":
        return True
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    stream = stream or sys.stdout
    return hasattr(stream, "isatty") and stream.isatty()


def severity(code: str) -> str:
    """The severity of the rule's category: crashes, silent data bugs and
    unreadable files are errors; slow paths and suppression comments that
    suppress nothing warnings."""
    return category_of(code).severity if code in CODES else "error"


def rule_url(code: str) -> str | None:
    """The documentation page of a rule; None for an unknown code."""
    if code not in CODES:
        return None
    from loadlint import DOCS_URL

    return f"{DOCS_URL}/{code}.md"


@dataclass
class Summary:
    """The counts the summary lines and some formats report."""

    fixable: int
    unsafe_fixable: int
    fixed: int
    show_fix_marks: bool
    unsafe_enabled: bool
    #: The rules the run had enabled (SARIF lists them all, found or not).
    enabled: frozenset[str] = frozenset()
    #: Of ``fixed``, those only the earlier fixes made possible (``Applied.later``).
    later: int = 0


def summarize(run: Run, unsafe_enabled: bool, fixing: bool) -> Summary:
    """Fixable, unsafe-fixable and fixed counts of a run."""
    safe = sum(1 for f in run.findings if f.fix and f.fix.applicability == "safe")
    unsafe = sum(1 for f in run.findings if f.fix and f.fix.applicability == "unsafe")
    fixed = sum(sum(r.applied.values()) for r in run.results)
    if unsafe_enabled:
        safe, unsafe = safe + unsafe, 0
    later = run.later if run.later is not None else sum(getattr(r.applied, "later", 0) for r in run.results)
    return Summary(safe, unsafe, fixed, True, unsafe_enabled, later=later)


def kinds(findings: list[Finding]) -> str:
    """``2 errors, 1 warning``: the findings split by the severity the machine formats give them."""
    errors = sum(1 for f in findings if severity(f.code) == "error")
    return f"{_plural(errors, 'error')}, {_plural(len(findings) - errors, 'warning')}"


def unlocked(fixed: int, later: int) -> str:
    """How many of the fixes the others made possible, for the fix summaries (or "")."""
    if not later:
        return ""
    return (f"{later} of the {fixed} fixes became possible only once the others were applied "
            f"(`check` counts {fixed - later} as fixable)")


def _fix_mark(finding: Finding, summary: Summary) -> str:
    if finding.fix is None:
        return ""
    if finding.fix.applicability == "safe" or summary.unsafe_enabled:
        return "[*] "
    return ""


def _position(finding: Finding) -> str:
    path = visible(finding.path)
    if finding.cell is not None:
        return f"{path}:cell {finding.cell}:{finding.location.row}:{finding.location.column}"
    return f"{path}:{finding.location.row}:{finding.location.column}"


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def summary_lines(run: Run, summary: Summary, style: Style) -> list[str]:
    """ruff's closing lines: what was found, fixed and is fixable."""
    out = []
    remaining = len(run.findings)
    errors = len(run.errors)
    if remaining == 0 and summary.fixed == 0 and errors == 0:
        return [style.bold("All checks passed!")]
    if summary.fixed:
        left = f": {kinds(run.findings)}" if remaining else ""
        out.append(f"Found {_plural(remaining + summary.fixed, 'problem')} ({summary.fixed} fixed, {remaining} remaining{left}).")
        if summary.later:
            out.append(unlocked(summary.fixed, summary.later) + ".")
    elif remaining:
        out.append(f"Found {_plural(remaining, 'problem')} ({kinds(run.findings)}).")
    unsafe = _plural(summary.unsafe_fixable, "unsafe fix", "unsafe fixes")
    if summary.fixable:
        line = f" {summary.fixable} fixable with --fix"
        if summary.unsafe_fixable:
            line += f" ({unsafe} available with --unsafe-fixes)"
        out.append(style.cyan("[*]") + line + ".")
    elif summary.unsafe_fixable:
        out.append(f"No safe fixes available ({unsafe} available with --unsafe-fixes).")
    return out


Sources = dict[str, list[str]]


def full_lines(run: Run, summary: Summary, style: Style, sources: Sources) -> list[str]:
    """``full``'s lines before the summary: each finding with its source line."""
    out: list[str] = []
    for result in run.results:
        lines = sources.get(result.path)
        for finding in result.findings:
            out.append(
                f"{style.bold(_position(finding))}: {style.red(finding.code)} {_fix_mark(finding, summary)}{visible(finding.message)}"
            )
            row = finding.location.row
            if finding.cell is not None:
                lines = sources.get(f"{result.path}:cell {finding.cell}")
            else:
                lines = sources.get(result.path)
            if lines is not None and 1 <= row <= len(lines):
                text = lines[row - 1].expandtabs(4) if "\t" not in lines[row - 1][: finding.location.column] else lines[row - 1]
                gutter = " " * len(str(row))
                end = finding.end_location.column if finding.end_location.row == row else len(text) + 1
                width = max(1, min(end, len(text) + 1) - finding.location.column)
                out.append(style.blue(f"{gutter} |"))
                out.append(style.blue(f"{row} |") + f" {visible(text)}")
                out.append(style.blue(f"{gutter} |") + " " + " " * (finding.location.column - 1) + style.red("^" * width))
                if finding.fix is not None:
                    out.append(style.blue(f"{gutter} =") + f" help: {visible(finding.fix.message)}")
                elif finding.fix_withheld is not None:
                    out.append(style.blue(f"{gutter} =") + f" help: {visible(finding.fix_withheld)}")
            out.append("")
        if result.error:
            out.append(f"{style.bold(visible(result.path))}: {style.red('error')}: {visible(result.error)}")
    return out


def concise_lines(run: Run, summary: Summary, style: Style, sources: Sources) -> list[str]:
    """``concise``'s lines before the summary: one per finding."""
    out = []
    for result in run.results:
        for finding in result.findings:
            out.append(f"{style.bold(_position(finding))}: {style.red(finding.code)} {_fix_mark(finding, summary)}{visible(finding.message)}")
        if result.error:
            out.append(f"{style.bold(visible(result.path))}: {style.red('error')}: {visible(result.error)}")
    return out


def format_full(run: Run, summary: Summary, style: Style, sources: Sources) -> str:
    """The default format: findings quoted in their source, then the summary."""
    return "\n".join(full_lines(run, summary, style, sources) + summary_lines(run, summary, style)) + "\n"


def format_concise(run: Run, summary: Summary, style: Style, sources: Sources) -> str:
    """One line per finding, then the summary."""
    return "\n".join(concise_lines(run, summary, style, sources) + summary_lines(run, summary, style)) + "\n"


def finding_to_dict(finding: Finding) -> dict[str, Any]:
    """ruff's JSON shape (1-based columns, end exclusive), plus ``name``, and
    ``fix_withheld`` where a fix would have introduced a finding."""
    fix = None
    if finding.fix is not None:
        fix = {
            "applicability": finding.fix.applicability,
            "message": finding.fix.message,
            "edits": [
                {
                    "content": edit.content,
                    "location": {"row": edit.location.row, "column": edit.location.column},
                    "end_location": {"row": edit.end_location.row, "column": edit.end_location.column},
                }
                for edit in finding.fix.edits
            ],
        }
    out = {
        "cell": finding.cell,
        "code": finding.code,
        "name": finding.name,
        "message": finding.message,
        "filename": finding.path,
        "location": {"row": finding.location.row, "column": finding.location.column},
        "end_location": {"row": finding.end_location.row, "column": finding.end_location.column},
        "fix": fix,
        "url": rule_url(finding.code),
        "severity": severity(finding.code),
        "noqa_row": finding.location.row,
    }
    if finding.fix_withheld is not None:
        out["fix_withheld"] = finding.fix_withheld
    return out


def format_json(run: Run, summary: Summary, style: Style, sources: Sources) -> str:
    """A JSON array of findings, ruff's shape."""
    return visible_json(json.dumps([finding_to_dict(f) for f in run.findings], indent=2)) + "\n"


def format_json_lines(run: Run, summary: Summary, style: Style, sources: Sources) -> str:
    """One JSON object per finding and line."""
    return "".join(visible_json(json.dumps(finding_to_dict(f))) + "\n" for f in run.findings)


Formatter = Callable[[Run, Summary, Style, Sources], str]

#: Format name -> (module, function), imported on first use: only CI runs
#: pay for the CI formats.
FORMATTERS: dict[str, tuple[str, str]] = {
    "full": ("loadlint.output.report", "format_full"),
    "concise": ("loadlint.output.report", "format_concise"),
    "json": ("loadlint.output.report", "format_json"),
    "json-lines": ("loadlint.output.report", "format_json_lines"),
    "sarif": ("loadlint.output.formats", "format_sarif"),
    "github": ("loadlint.output.formats", "format_github"),
    "gitlab": ("loadlint.output.formats", "format_gitlab"),
    "junit": ("loadlint.output.formats", "format_junit"),
    "pylint": ("loadlint.output.formats", "format_pylint"),
}

#: The human formats' lines before the summary.
_HUMAN_LINES = {"full": full_lines, "concise": concise_lines}


def formatter(name: str) -> Formatter:
    """The formatter registered as ``name``."""
    module, function = FORMATTERS[name]
    found: Formatter = getattr(importlib.import_module(module), function)
    return found


def source_lines(results: list[FileResult]) -> Sources:
    """Each result's source lines by path (a notebook's by ``path:cell N``)."""
    out = {}
    for result in results:
        # After a fix the findings left are positioned in the fixed text.
        if result.fixed is not None:
            out[result.path] = split_lines(result.fixed)
        elif result.source is not None:
            out[result.path] = split_lines(result.source.text)
        # Notebook findings are positioned inside their cell.
        for cell, text in result.cell_sources.items():
            out[f"{result.path}:cell {cell}"] = split_lines(text)
    return out


def statistics(run: Run, summary: Summary, fmt: str = "full") -> str:
    """``--statistics``: ``count  code  [*] name`` per code, most frequent
    first; ruff's objects (code, name, count, fixable) in ``json`` (a list)
    and ``json-lines`` (one a line), with the severity the formats give."""
    counts: dict[str, list[Finding]] = {}
    for finding in run.findings:
        counts.setdefault(finding.code, []).append(finding)
    rows = sorted(counts.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    width = max((len(str(len(v))) for _, v in rows), default=1)
    out = []
    entries = []
    for code, findings in rows:
        fixable = any(f.fix and (f.fix.applicability == "safe" or summary.unsafe_enabled) for f in findings)
        mark = "[*]" if fixable else "[ ]"
        out.append(f"{len(findings):>{width}}  {code}  {mark} {findings[0].name}")
        entries.append({"code": code, "name": findings[0].name, "count": len(findings), "fixable": bool(fixable),
                        "severity": severity(code)})
    if fmt == "json":
        return visible_json(json.dumps(entries, indent=2)) + "\n"
    if fmt == "json-lines":
        return "".join(visible_json(json.dumps(entry)) + "\n" for entry in entries)
    return "".join(visible(line) + "\n" for line in out)


def render(
    run: Run,
    summary: Summary,
    fmt: str,
    style: Style,
    *,
    quiet: bool = False,
    show_fixes: bool = False,
    as_statistics: bool = False,
) -> str:
    """The whole report of a run: ``fmt``'s text, or ``--statistics``; the
    human formats with ``--show-fixes`` before the summary (ruff's place
    for it), and ``--quiet`` without the summary."""
    if as_statistics:
        return statistics(run, summary, fmt)
    if fmt not in HUMAN_FORMATS:
        return formatter(fmt)(run, summary, style, {})
    body = _HUMAN_LINES[fmt](run, summary, style, source_lines(run.results))
    text = "".join(line + "\n" for line in body)
    if show_fixes and summary.fixed:
        text += "\n" + fixed_listing(run) + "\n"
    if not quiet:
        text += "".join(line + "\n" for line in summary_lines(run, summary, style))
    return text


def fixed_listing(run: Run) -> str:
    """``--show-fixes``, ruff's layout: a total, then per file the count per rule."""
    tables = [(r.path, r.applied) for r in run.results if r.applied]
    if not tables:
        return ""
    total = sum(sum(applied.values()) for _, applied in tables)
    width = max(len(str(n)) for _, applied in tables for n in applied.values())
    lines = [f"Fixed {_plural(total, 'problem')}:"]
    for path, applied in sorted(tables):
        lines.append(f"- {visible(path)}:")
        for code, count in sorted(applied.items()):
            name = name_of(code) if code in CODES else "measured-configuration"
            lines.append(f"    {count:>{width}} × {code} ({name})")
    return "\n".join(lines) + "\n"


def diff(run: Run) -> tuple[str, int]:
    """``--diff``: (the fixes as one unified diff, how many fixes it holds);
    a notebook gives one diff per changed cell, as ruff prints them.  Every
    line is escaped as report lines are: a context line ``" ::error"`` would
    be a workflow command once a CI log trims its blank, and an escape
    sequence in the code would reach the terminal."""
    chunks: list[str] = []
    fixed = 0
    for result in run.results:
        if result.fixed is None:
            continue
        if result.cell_changes:
            chunks.extend(unified_diff(f"{visible(result.path)}:cell {cell}", before, after) for cell, before, after in result.cell_changes)
        elif result.source is not None:
            chunks.append(unified_diff(visible(result.path), result.source.text, result.fixed))
        else:
            continue
        fixed += sum(result.applied.values())
    return visible_lines("".join(chunks)), fixed


# File names that are not UTF-8 reach reports as lone surrogates
# (os.fsdecode), and so can source lines of a notebook (JSON escapes).  A
# stream that cannot encode them must not fail the report at its last step.


def writable(text: str, stream: TextIO) -> str:
    """``text`` as ``stream`` can encode it, unencodable characters escaped."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding, getattr(stream, "errors", None) or "strict")
    except UnicodeEncodeError:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:
        pass
    return text


def encoded(text: str) -> bytes:
    """UTF-8 for a report file: a non-UTF-8 file name as its own bytes."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace")
