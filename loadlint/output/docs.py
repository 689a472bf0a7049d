"""Rule pages: ``rules/LLnnn.md`` are generated from the rule docstrings.

The docstring is the single source (as in ruff and Fixit): ``loadlint rule``
prints it, SARIF embeds it, and ``python -m loadlint.output.docs`` writes the pages;
a test fails when a page is stale or missing, or a page has no rule.
"""

from __future__ import annotations

import sys
from pathlib import Path

from loadlint.rules import CODES, all_rules, category_of
from loadlint.rules.categories import CATEGORIES
from loadlint.rules.runtime import RUNTIME_CODES

SECTIONS = ("## What it does", "## Why is this bad?", "## Example", "Use instead:", "## Fix safety", "## References")


def pages() -> dict[str, str]:
    """Every code's page: the static rules' and the run-time codes' (``loadlint trace``)."""
    static = {f"{rule.code}.md": rule.documentation() for rule in all_rules()}
    return static | {f"{code}.md": entry.documentation() for code, entry in RUNTIME_CODES.items()}


def write(directory: Path) -> list[str]:
    directory.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in pages().items():
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    return changed


def _spans(codes: list[str]) -> str:
    """``LL001-LL013, LL015``: runs of codes next to each other in the registry."""
    order = list(CODES)
    runs: list[list[str]] = []
    for code in codes:
        if runs and order.index(code) == order.index(runs[-1][-1]) + 1:
            runs[-1].append(code)
        else:
            runs.append([code])
    return ", ".join(run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


def legend() -> str:
    """Which codes are errors and which warnings, by category."""
    parts: dict[str, list[str]] = {"error": [], "warning": []}
    for category in CATEGORIES.values():
        codes = [code for code in CODES if category_of(code) is category]
        if codes:
            parts[category.severity].append(f"{category.title} ({_spans(codes)})")
    return f"Errors: {', '.join(parts['error'])}; warnings: {', '.join(parts['warning'])}.\n"


def rule_table() -> str:
    """The README's rule table (Markdown), after the legend of severities."""
    rows = [legend(), "| Code | Name | What it catches | Fix |", "|---|---|---|---|"]
    fix = {"always": "yes", "sometimes": "sometimes", "none": "no"}
    for rule in all_rules():
        rows.append(
            f"| [{rule.code}](rules/{rule.code}.md) | {rule.name} | {rule.summary} | {fix[rule.fix_availability]} |"
        )
    return "\n".join(rows) + "\n"


README_START, README_END = "<!-- rules:start -->\n", "<!-- rules:end -->\n"


def update_readme(readme: Path) -> bool:
    """Rewrite the rule table between the README's markers; True if changed."""
    text = readme.read_text(encoding="utf-8")
    start = text.index(README_START) + len(README_START)
    end = text.index(README_END)
    new = text[:start] + rule_table() + text[end:]
    if new != text:
        readme.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[2]
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else root / "rules"
    for name in write(target):
        print(f"wrote {target / name}")
    if len(sys.argv) == 1 and update_readme(root / "README.md"):
        print("updated the rule table in README.md")
