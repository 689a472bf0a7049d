"""Source texts that tests parse, render and compare: files that decode."""

from __future__ import annotations

from pathlib import Path

from loadlint.sources.source import DecodeError, decode

REPO = Path(__file__).resolve().parents[1]
FIXTURES = sorted((REPO / "tests" / "fixtures").rglob("*.py"))


def decoded(paths: list[Path]) -> list[tuple[str, str]]:
    """(path relative to the repository, text) of each of ``paths`` that decodes."""
    texts = []
    for path in paths:
        try:
            texts.append((str(path.relative_to(REPO)), decode(path.read_bytes()).text))
        except DecodeError:
            continue
    return texts
