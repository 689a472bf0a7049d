"""Rendering (loadlint.cst.codegen) gives libcst's code and libcst's positions."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from loadlint.cst.codegen import code_for_node, code_ranges
from tests.texts import FIXTURES, REPO, decoded

SAMPLES = [
    "x = (  # comment\n    f(a,\n      b=[1, 2],  # more\n    )\n)\n",
    "if a:\r\n    y = {k: v for k, v in d.items()}\r\nelse:\r\n\tz = '''multi\nline'''\n",
    "@d\nasync def f(x: int = 1, *a, **k) -> None:\n    return (yield x), [*a], {**k}\n",
    "match p:\n    case [1, *r] if r:\n        pass\n    case {'k': v} | C(x=1):\n        pass\n",
    "s = f'{a!r:>{w}} {b=}' + rb'\\n' \\\n    + 'x'\n",
    "x = 1\ry = (1,\r     2)\rif x:\r    z = f(a,\r          b)\r",
]


def _texts() -> list[tuple[str, str]]:
    rules = sorted((REPO / "loadlint" / "rules").glob("ll2*.py"))
    return [(f"sample {i}", text) for i, text in enumerate(SAMPLES)] + decoded(FIXTURES + rules)


def _modules() -> list[tuple[str, cst.Module]]:
    out = []
    for name, text in _texts():
        try:
            out.append((name, cst.parse_module(text)))
        except cst.ParserSyntaxError:
            continue
    return out


MODULES = _modules()


def test_there_is_enough_to_compare() -> None:
    assert len(MODULES) > 100


@pytest.mark.parametrize("name, module", MODULES, ids=[name for name, _ in MODULES])
def test_code_and_positions_are_libcsts(name: str, module: cst.Module) -> None:
    assert code_for_node(module, module) == module.code
    for stmt in module.body:
        assert code_for_node(stmt, module) == module.code_for_node(stmt)
    assert dict(code_ranges(module, module)) == dict(MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))


def test_an_empty_modules_defaults_render_a_lone_node() -> None:
    node = cst.parse_expression("f(a,\n  b)")
    assert code_for_node(node) == cst.Module([]).code_for_node(node) == "f(a,\n  b)"
    block = cst.parse_statement("if x:\n  y = 1\n")
    assert code_for_node(block) == cst.Module([]).code_for_node(block)
