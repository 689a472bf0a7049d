"""``find_all`` finds what ``libcst.matchers.findall`` finds for a node type."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import libcst.matchers as m
import pytest

from loadlint.walk import find_all

SOURCES = sorted((Path(__file__).parent / "fixtures" / "fix").glob("*.in.py"))[:12]


@pytest.mark.parametrize("kind", [cst.Call, cst.Attribute, cst.Assign, cst.If, cst.Name, cst.Lambda])
@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_find_all_matches_libcst(path: Path, kind: type[cst.CSTNode]) -> None:
    module = cst.parse_module(path.read_bytes())
    expected = m.findall(module, getattr(m, kind.__name__)())
    found = find_all(module, kind)
    # The same nodes; the order differs only where field order is not source
    # order (an argument's value before its keyword).
    assert len(found) == len(expected) and {id(n) for n in found} == {id(n) for n in expected}


def test_find_all_includes_the_root_parents_first() -> None:
    module = cst.parse_module("f(g(1), h(x=k()))\n")
    call = module.body[0].body[0].value  # type: ignore[attr-defined]
    assert [cst.Module([]).code_for_node(n.func) for n in find_all(call, cst.Call)] == ["f", "g", "h", "k"]
