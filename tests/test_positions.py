"""Positions computed per top-level statement (line numbers from Python's
parser) equal libcst's whole-module positions, node for node."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from loadlint.engine.positions import Positions
from loadlint.types import Location

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
    nodes = {id(node): node for node in everything}
    checked = 0
    for key in local._statements[0]:  # noqa: SLF001 - keyed by id
        if key in nodes:
            node = nodes[key]
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


NESTED = """\
class Model:
    # comment
    x = 1; y = (2,
      3)

    @property
    @other(a,
           b)
    def f(self):
        if a:
            pass
        elif b: c(); d()
        else:
            for i in DataLoader(x,
                    num_workers=0):
                pass
            else:
                while x:
                    break
        try:
            del a, b
        except (ValueError,
                TypeError) as e:
            raise
        except Exception:
            pass
        else:
            with open(x) as f, open(
                y) as g:
                return lambda: [
            1]
        finally:
            async def g():
                async for x in y:
                    await z
                async with a:
                    pass
        match value:
            case 1:
                loader = DataLoader(x)
            case _: pass
        global q; nonlocal r
        assert x, (
          "message")
        s = '''multi
line'''; t = 1 \\
            + 2
z = 1
"""


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_nested_statements(newline: str) -> None:
    text = NESTED.replace("\n", newline)
    assert same_positions(text) > 150
    assert same_positions(text.replace("    ", "\t")) > 150
    # A node in a method: positions are computed for its own statement only.
    module = cst.parse_module(text)
    positions = Positions(module, text)
    cls = cst.ensure_type(module.body[0], cst.ClassDef)
    method = [s for s in cst.ensure_type(cls.body, cst.IndentedBlock).body if isinstance(s, cst.FunctionDef)][0]
    body = cst.ensure_type(method.body, cst.IndentedBlock).body
    branch = cst.ensure_type(body[0], cst.If)
    assert positions.range(branch.test) == (Location(10, 12), Location(10, 13))
    rendered = [positions._statements[1][i][0] for i in positions._local]  # noqa: SLF001
    assert rendered == [branch]
    match = [s for s in body if isinstance(s, cst.Match)][0]
    line = cst.ensure_type(cst.ensure_type(match.cases[0].body, cst.IndentedBlock).body[0], cst.SimpleStatementLine)
    value = cst.ensure_type(line.body[0], cst.Assign).value
    assert positions.range(value)[0].row == text.count(newline, 0, text.index("loader = ")) + 1


REPARSE = """\
# header comment
import torch
from torch.utils.data import DataLoader


@decorated
def build(ds):
    # inside
    loader = DataLoader(ds, batch_size=4)
    return loader
        # deeper comment after the block

class Trainer:
    def loaders(self):
        return DataLoader(self.ds)

for batch in build(None):
    pass
"""


def test_reparse_parses_only_the_edited_statement_and_matches_a_full_parse() -> None:
    from loadlint.engine.analysis import analyse
    from loadlint.types import Options
    from loadlint.engine.positions import reparse, statement_bounds
    from loadlint.rules import CODES
    from loadlint.types import Edit

    module = cst.parse_module(REPARSE)
    bounds = statement_bounds(module, REPARSE)
    assert bounds is not None and len(bounds) == len(module.body) + 1
    from loadlint.types import HardwareProfile

    options = Options(frozenset(CODES), lambda: HardwareProfile(usable_cpus=4, logical_cpus=4, gpu_count=1))
    for old, new in [("batch_size=4)", "batch_size=4, num_workers=2)"), ("(self.ds)", "(self.ds, num_workers=2)")]:
        start = REPARSE.index(old)
        edit = Edit(new, start, start + len(old), Location(1, 1), Location(1, 1))
        new_text = REPARSE.replace(old, new)
        again = reparse(module, REPARSE, bounds, [edit], new_text)
        assert again is not None and again.code == new_text
        # The statements no edit touches are the same nodes.
        kept = [a is b for a, b in zip(module.body, again.body)]
        assert kept.count(False) == 1
        assert analyse(new_text, "x.py", options, parsed=(again, None))[0] == analyse(new_text, "x.py", options)[0]
    # Statements inserted where one starts (an added import) are parsed with it.
    for index, inserted in [(0, "import os\n"), (1, "import os\n"), (2, "WORKERS = 4\nimport os\n"), (4, "import os\n")]:
        start = bounds[index]
        edit = Edit(inserted, start, start, Location(1, 1), Location(1, 1))
        new_text = REPARSE[:start] + inserted + REPARSE[start:]
        again = reparse(module, REPARSE, bounds, [edit], new_text)
        assert again is not None and again.code == new_text
        assert again.deep_equals(cst.parse_module(new_text))
        # Only what is inserted is parsed: the file's statements are kept.
        assert all(any(a is b for b in again.body) for a in module.body)
        assert len(again.body) == len(module.body) + inserted.count("\n")
        assert analyse(new_text, "x.py", options, parsed=(again, None))[0] == analyse(new_text, "x.py", options)[0]
    # Inserted before a statement that is edited too: parsed with it.
    start, at = bounds[1], REPARSE.index(" DataLoader\n") + len(" DataLoader")
    edits = [Edit("import os\n", start, start, Location(1, 1), Location(1, 1)), Edit(", Dataset", at, at, Location(1, 1), Location(1, 1))]
    new_text = REPARSE[:start] + "import os\n" + REPARSE[start:at] + ", Dataset" + REPARSE[at:]
    chunks: list[str] = []
    again = reparse(module, REPARSE, bounds, edits, new_text, chunks)
    assert again is not None and again.code == new_text and again.deep_equals(cst.parse_module(new_text))
    assert chunks == ["import os\nfrom torch.utils.data import DataLoader, Dataset\n"]
    # Where a statement starts, anything else (an indented line, a comment,
    # an edit of what leads the statement) is parsed with the whole text.
    for index, inserted, end in [(4, "    x = 1\n", 0), (4, "# note\n", 0), (2, "", 1), (1, "import", 4)]:
        start = bounds[index]
        edit = Edit(inserted, start, start + end, Location(1, 1), Location(1, 1))
        assert reparse(module, REPARSE, bounds, [edit], REPARSE[:start] + inserted + REPARSE[start + end:]) is None


def _bounds_cases() -> list[tuple[str, str]]:
    from loadlint.rules.base import dedent
    from loadlint.testing import iter_cases

    from tests.texts import FIXTURES, decoded

    cases = decoded(FIXTURES)
    cases += [(str(case), dedent(case.case.code)) for case in iter_cases()]
    cases += [("tricky", TRICKY), ("tricky-crlf", TRICKY.replace("\n", "\r\n")), ("nested", NESTED), ("reparse", REPARSE)]
    return cases


def test_statement_bounds_from_line_numbers_equal_the_rendered_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every golden fixture and rule example: the bounds found from Python's
    line numbers are the ones rendering each statement gives, without falling back."""
    from loadlint.engine import positions
    from loadlint.engine.positions import rendered_bounds, statement_bounds

    rendered = rendered_bounds
    fell_back: list[str] = []
    monkeypatch.setattr(positions, "rendered_bounds", lambda m, t: fell_back.append(t) or rendered(m, t))
    compared = 0
    for name, text in _bounds_cases():
        try:
            module = cst.parse_module(text)
        except Exception:  # unparsable examples (LL900, LL901)
            continue
        expected = rendered(module, text)
        assert statement_bounds(module, text) == expected, name
        compared += expected is not None
    assert compared > 300
    # Only texts Python's parser rejects (a rule's LL900 examples) need rendering.
    assert len(fell_back) < 10


def test_statement_bounds_fall_back_where_the_parsers_disagree() -> None:
    from loadlint.engine.positions import rendered_bounds, statement_bounds

    # A line continuation before a statement: Python starts it a line later.
    for text in ["x = 1\n\\\ny = 2\n", "type X = int\n\nDataLoader(x)\n", "x = 1\n    # indented\n\ny = 2\n  # end\n"]:
        module = cst.parse_module(text)
        assert statement_bounds(module, text) == rendered_bounds(module, text), text
    assert statement_bounds(cst.parse_module("x = 1"), "x = 1") is None


@pytest.mark.parametrize("text", [NESTED, NESTED.replace("    ", "\t"), TRICKY, REPARSE, NESTED.replace("\n", "\r\n")],
                         ids=["nested", "tabs", "tricky", "reparse", "crlf"])
def test_a_call_renders_back_exactly_with_its_block_indent(text: str) -> None:
    """What a fix relies on to render a rewritten call without first
    rendering the original: with the indent of the block its statement
    stands in, each call (multi-line ones included) reads as in the text;
    inside a match statement no indent is claimed."""
    from loadlint.engine.fixes import render
    from loadlint.cst.walk import find_all

    module = cst.parse_module(text)
    positions = Positions(module, text)
    claimed = 0
    for call in find_all(module, cst.Call):
        indent = positions.block_indent(call)
        if indent is None:
            assert "DataLoader(x)" in module.code_for_node(call)  # the one in the match statement
            continue
        start, end, _, _ = positions.span(call)
        assert render(call, module, indent) == text[start:end]
        claimed += 1
    assert claimed >= 2


@pytest.mark.parametrize("text", ["", "a", "\n", "a\n", "a\nb", "\n\n", "a\r\nb\rc\n", "\r", "x\x0cy\n\x85z\u2028w\n"])
def test_line_starts_follow_pythons_line_breaks_only(text: str) -> None:
    import re

    from loadlint.sources.source import line_starts

    assert line_starts(text) == [0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", text))]
