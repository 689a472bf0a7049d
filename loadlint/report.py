"""Step 6b: findings to text.

Formatters take the whole run and return one string.  Machine-readable
formats never carry colour, progress or summaries.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Callable

from loadlint.api import Run
from loadlint.engine import FileResult
from loadlint.rules import CODES
from loadlint.source import lines as split_lines
from loadlint.types import Finding


@dataclass
class Style:
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


def use_color(choice: str, stream=None) -> bool:
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
    """Crashes, silent data bugs and unreadable files are errors; slow paths warnings."""
    return "warning" if code.startswith("LL2") else "error"


def rule_url(code: str) -> str | None:
    if code not in CODES:
        return None
    from loadlint import DOCS_URL

    return f"{DOCS_URL}/{code}.md"


@dataclass
class Summary:
    fixable: int
    unsafe_fixable: int
    fixed: int
    show_fix_marks: bool
    unsafe_enabled: bool
    #: The rules the run had enabled (SARIF lists them all, found or not).
    enabled: frozenset[str] = frozenset()


def summarize(run: Run, unsafe_enabled: bool, fixing: bool) -> Summary:
    safe = sum(1 for f in run.findings if f.fix and f.fix.applicability == "safe")
    unsafe = sum(1 for f in run.findings if f.fix and f.fix.applicability == "unsafe")
    fixed = sum(sum(r.applied.values()) for r in run.results)
    if unsafe_enabled:
        safe, unsafe = safe + unsafe, 0
    return Summary(safe, unsafe, fixed, True, unsafe_enabled)


def _fix_mark(finding: Finding, summary: Summary) -> str:
    if finding.fix is None:
        return ""
    if finding.fix.applicability == "safe" or summary.unsafe_enabled:
        return "[*] "
    return ""


def _position(finding: Finding) -> str:
    if finding.cell is not None:
        return f"{finding.path}:cell {finding.cell}:{finding.location.row}:{finding.location.column}"
    return f"{finding.path}:{finding.location.row}:{finding.location.column}"


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def summary_lines(run: Run, summary: Summary, style: Style) -> list[str]:
    out = []
    remaining = len(run.findings)
    errors = len(run.errors)
    if remaining == 0 and summary.fixed == 0 and errors == 0:
        return [style.bold("All checks passed!")]
    if summary.fixed:
        if remaining:
            out.append(f"Found {_plural(remaining + summary.fixed, 'error')} ({summary.fixed} fixed, {remaining} remaining).")
        else:
            out.append(f"Found {_plural(summary.fixed, 'error')} ({summary.fixed} fixed, 0 remaining).")
    elif remaining:
        out.append(f"Found {_plural(remaining, 'error')}.")
    unsafe = _plural(summary.unsafe_fixable, "unsafe fix", "unsafe fixes")
    if summary.fixable:
        line = f" {summary.fixable} fixable with --fix"
        if summary.unsafe_fixable:
            line += f" ({unsafe} available with --unsafe-fixes)"
        out.append(style.cyan("[*]") + line + ".")
    elif summary.unsafe_fixable:
        out.append(f"No safe fixes available ({unsafe} available with --unsafe-fixes).")
    return out


def format_full(run: Run, summary: Summary, style: Style, sources: dict[str, list[str]]) -> str:
    out: list[str] = []
    for result in run.results:
        lines = sources.get(result.path)
        for finding in result.findings:
            out.append(
                f"{style.bold(_position(finding))}: {style.red(finding.code)} {_fix_mark(finding, summary)}{finding.message}"
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
                out.append(style.blue(f"{row} |") + f" {text}")
                out.append(style.blue(f"{gutter} |") + " " + " " * (finding.location.column - 1) + style.red("^" * width))
                if finding.fix is not None:
                    out.append(style.blue(f"{gutter} =") + f" help: {finding.fix.message}")
            out.append("")
        if result.error:
            out.append(f"{style.bold(result.path)}: {style.red('error')}: {result.error}")
    out.extend(summary_lines(run, summary, style))
    return "\n".join(out) + "\n"


def format_concise(run: Run, summary: Summary, style: Style, sources) -> str:
    out = []
    for result in run.results:
        for finding in result.findings:
            out.append(f"{style.bold(_position(finding))}: {style.red(finding.code)} {_fix_mark(finding, summary)}{finding.message}")
        if result.error:
            out.append(f"{style.bold(result.path)}: {style.red('error')}: {result.error}")
    out.extend(summary_lines(run, summary, style))
    return "\n".join(out) + "\n"


def finding_to_dict(finding: Finding) -> dict:
    """ruff's JSON shape (1-based columns, end exclusive), plus ``name``."""
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
    return {
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


def format_json(run: Run, summary: Summary, style: Style, sources) -> str:
    return json.dumps([finding_to_dict(f) for f in run.findings], indent=2) + "\n"


def format_json_lines(run: Run, summary: Summary, style: Style, sources) -> str:
    return "".join(json.dumps(finding_to_dict(f)) + "\n" for f in run.findings)


Formatter = Callable[[Run, Summary, Style, dict], str]

FORMATTERS: dict[str, Formatter] = {
    "full": format_full,
    "concise": format_concise,
    "json": format_json,
    "json-lines": format_json_lines,
}

#: Formats meant for people: they get colour and the summary lines.
HUMAN_FORMATS = frozenset({"full", "concise"})


def formatter(name: str) -> Formatter:
    if name not in FORMATTERS:
        try:
            from loadlint import formats  # noqa: F401  (registers the CI formats)
        except ImportError:
            pass
    return FORMATTERS[name]


def source_lines(results: list[FileResult]) -> dict[str, list[str]]:
    out = {}
    for result in results:
        if result.source is not None:
            out[result.path] = split_lines(result.source.text)
        # Notebook findings are positioned inside their cell.
        for cell, text in getattr(result, "cell_sources", {}).items():
            out[f"{result.path}:cell {cell}"] = split_lines(text)
    return out


def statistics(run: Run, summary: Summary) -> str:
    """``--statistics``: ``count  code  [*] name`` per code, most frequent first."""
    counts: dict[str, list[Finding]] = {}
    for finding in run.findings:
        counts.setdefault(finding.code, []).append(finding)
    rows = sorted(counts.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    width = max((len(str(len(v))) for _, v in rows), default=1)
    out = []
    for code, findings in rows:
        fixable = any(f.fix and (f.fix.applicability == "safe" or summary.unsafe_enabled) for f in findings)
        mark = "[*]" if fixable else "[ ]"
        out.append(f"{len(findings):>{width}}  {code}  {mark} {findings[0].name}")
    return "\n".join(out) + ("\n" if out else "")
