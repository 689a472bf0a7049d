"""Positions computed per top-level statement (line numbers from Python's
parser) equal libcst's whole-module positions, node for node."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from loadlint.fixes import Positions

REPO = Path(__file__).resolve().parents[1]
SOURCES = sorted((REPO / "loadlint").rglob("*.py"))[:40]

TRICKY = """\
# comment
import os; import sys

\x0c
@decorator(
    x=1,
)

# between
@other
class A:
    def f(self):  # trailing
        return (1,
                2)

async def g():
    pass
await g()
s = '''multi
line''' ; t = 1 \\
    + 2
"""


def same_positions(text: str) -> int:
    module = cst.parse_module(text)
    local, whole = Positions(module, text), Positions(module, text)
    everything = whole._ranges  # noqa: SLF001 - the reference positions
    assert local._statements is not None  # noqa: SLF001
    checked = 0
    for node in local._statements[0]:  # noqa: SLF001
        if node in everything:
            assert local.range(node) == whole.range(node), (type(node).__name__, text[:80])
            checked += 1
    return checked


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_tricky_layouts(newline: str) -> None:
    assert same_positions(TRICKY.replace("\n", newline)) > 50


def test_the_projects_own_sources() -> None:
    assert sum(same_positions(path.read_text(encoding="utf-8")) for path in SOURCES) > 10_000


def test_code_pythons_parser_rejects_gets_whole_module_positions() -> None:
    # Python 3.12 syntax: libcst parses it, an older Python's parser does not.
    text = "type X = int\n\nDataLoader(x)\n"
    module = cst.parse_module(text)
    positions = Positions(module, text)
    call = module.body[1].body[0].value  # type: ignore[attr-defined]
    assert positions.range(call)[0].row == 3
