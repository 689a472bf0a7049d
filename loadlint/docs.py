"""Rule pages: ``rules/LLnnn.md`` are generated from the rule docstrings.

The docstring is the single source (as in ruff and Fixit): ``loadlint rule``
prints it, SARIF embeds it, and ``python -m loadlint.docs`` writes the pages;
a test fails when a page is stale or missing, or a page has no rule.
"""

from __future__ import annotations

import sys
from pathlib import Path

from loadlint.rules import all_rules

SECTIONS = ("## What it does", "## Why is this bad?", "## Example", "Use instead:", "## Fix safety", "## References")


def pages() -> dict[str, str]:
    return {f"{rule.code}.md": rule.documentation() for rule in all_rules()}


def write(directory: Path) -> list[str]:
    directory.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in pages().items():
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    return changed


def rule_table() -> str:
    """The README's rule table (Markdown)."""
    rows = ["| Code | Name | What it catches | Fix |", "|---|---|---|---|"]
    fix = {"always": "yes", "sometimes": "sometimes", "none": "no"}
    for rule in all_rules():
        rows.append(
            f"| [{rule.code}](rules/{rule.code}.md) | {rule.name} | {rule.summary} | {fix[rule.fix_availability]} |"
        )
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "rules"
    for name in write(target):
        print(f"wrote {target / name}")
