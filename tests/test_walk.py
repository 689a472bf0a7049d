"""``find_all`` finds what ``libcst.matchers.findall`` finds for a node type."""

from __future__ import annotations

import dataclasses
import sys
import typing
from pathlib import Path

import libcst as cst
import libcst.matchers as m
import pytest

from loadlint.cst import walk as walk_module
from loadlint.cst.walk import find_all

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


ROWS_CASES = {
    "decorators and clauses": (
        "import os\n\n@dec(\n    a,\n)\n@other\ndef f(x):  # c\n    if x: return 1\n    elif x > 2:\n        pass\n"
        "    else:\n        y = 2; z = 3\n    try:\n        pass\n    except E:\n        pass\n    finally:\n        pass\n"
        "# comment\n\n\nclass A:\n    @property\n    def p(self): return 1\n\n    @staticmethod\n    async def q():\n"
        "        async with a as b:\n            async for c in b: pass\n\n@dec\nclass B: pass\n"
    ),
    "continuations and strings": (
        'x = 1 + \\\n    2\ns = """\nif not a statement:\n"""\nd = {\n    "a": (1,\n          2),\n}\n'
        "while s:\n    break\nelse:\n    pass\nwith open(p) as f, \\\n     open(q) as g:\n    ...\n"
    ),
    "no final line break": "def f():\n    return (1,\n            2)\n\n   ",
    "crlf and form feed": "import a\r\n\x0c\r\nclass C:\r\n    x: int = 1\r\n    def f(self): ...\r\n",
    "comments at column 0 in a body": "def f():\n    a = 1\n# not the end\n    b = 2\n\n# trailing\nc = 3\n",
    "soft keywords as names": "match = 1\ncase = 2\ntype = 3\nprint(match, case)\n",
}
if sys.version_info >= (3, 11):
    ROWS_CASES["try star"] = "try:\n    pass\nexcept* E:\n    pass\n"


@pytest.mark.parametrize("text", list(ROWS_CASES.values()), ids=list(ROWS_CASES))
def test_scanned_rows_agree_with_pythons_parser(text: str) -> None:
    from loadlint.cst.rows import parsed_rows, scanned_rows

    module = cst.parse_module(text)
    scanned = scanned_rows(module, text)
    assert scanned is not None
    assert scanned == parsed_rows(module, text)


def test_scanned_rows_give_way_where_lines_are_ambiguous() -> None:
    from loadlint.cst.rows import scanned_rows, statement_rows

    # ``case`` lines are not statements; a line starting with a continuation
    # starts its statement on the next line.
    for text in ("match x:\n    case 1:\n        pass\n", "x = 1\n\\\ny = 2\n"):
        module = cst.parse_module(text)
        assert scanned_rows(module, text) is None
        assert statement_rows(module, text) is not None


UNITS_CASES = {
    **ROWS_CASES,
    "match": "match x:\n    case [1, y]:\n        if y:\n            z = 1\n    case _:\n        pass\nw = 2\n",
    "nested blocks, tabs": "class A:\n\tdef f(self):\n\t\tfor i in x:\n\t\t\twhile i: i -= 1\n\t\telse:\n\t\t\treturn [j for j in i]\n",
    "lambda and comprehension": "f = lambda a, *b: {k: v for k, v in a}\nif f:\n    g = (lambda: (yield))\n",
}


class _Visitor:
    """Hooks of each kind the collector has (a node, a field, after a node)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.seen.append(node.value)

    def visit_For_body(self, node: cst.For) -> None:
        self.seen.append("for-body")

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.seen.append("def-end")


class _Skipping(_Visitor):
    """Hooks that skip a node's children, and an indented block's and a match statement's."""

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        self.seen.append("lambda")
        return False

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self.seen.append("lambda-end")

    def visit_IndentedBlock_body(self, node: cst.IndentedBlock) -> None:
        self.seen.append("block")

    def leave_IndentedBlock_body(self, node: cst.IndentedBlock) -> None:
        self.seen.append("block-end")

    def leave_Match(self, node: cst.Match) -> None:
        self.seen.append("match-end")

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False


def test_walk_units_calls_the_hooks_walk_calls_where_one_skips_children() -> None:
    from loadlint.cst.walk import walk, walk_units

    met: set[str] = set()
    skipped = 0
    for text in UNITS_CASES.values():
        module = cst.parse_module(text)
        alone, both = _Skipping(), _Skipping()
        walk(module, alone)
        owner, _ = walk_units(module, both)
        assert both.seen == alone.seen, text
        met.update(both.seen)
        # A skipped node is in its unit; its children are not.
        for node in [*find_all(module, cst.Lambda), *find_all(module, cst.ClassDef)]:
            assert id(node) in owner and id(node.body) not in owner
            skipped += 1
    assert {"lambda", "lambda-end", "block", "block-end", "match-end"} <= met and skipped >= 3


def _reference_units(module: cst.Module) -> tuple[dict[int, int], list[tuple[cst.BaseStatement, tuple[str, ...]]]]:
    """The units found another way: from a stack over every code field,
    each statement of an indented block (but inside a match statement) a
    unit of its own, with its blocks' indentation."""
    from loadlint.cst.walk import _fields

    owner: dict[int, int] = {}
    units: list[tuple[cst.BaseStatement, tuple[str, ...]]] = []
    stack: list[tuple[cst.CSTNode, int, bool]] = []
    for stmt in module.body:
        units.append((stmt, ()))
        stack.append((stmt, len(units) - 1, False))
    while stack:
        node, unit, flat = stack.pop()
        owner[id(node)] = unit
        if type(node) is cst.IndentedBlock and not flat:
            indent = module.default_indent if node.indent is None else node.indent
            for child in node.body:
                units.append((child, units[unit][1] + (indent,)))
                stack.append((child, len(units) - 1, False))
            continue
        flat = flat or type(node) is cst.Match
        for name in _fields(type(node)):
            value = getattr(node, name)
            for child in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(child, cst.CSTNode):
                    stack.append((child, unit, flat))
    return owner, units


@pytest.mark.parametrize("text", [*UNITS_CASES.values(), *(p.read_bytes().decode("utf-8", "replace") for p in SOURCES)],
                         ids=[*UNITS_CASES, *(p.name for p in SOURCES)])
def test_walk_units_walks_as_walk_does_and_finds_the_statement_units(text: str) -> None:
    from loadlint.cst.walk import statement_units, walk, walk_units

    module = cst.parse_module(text)
    alone, both = _Visitor(), _Visitor()
    walk(module, alone)
    owner, units = walk_units(module, both)
    assert both.seen == alone.seen

    def by_statement(owner: dict[int, int], units: list[tuple[cst.BaseStatement, tuple[str, ...]]]) -> dict[int, tuple[int, tuple[str, ...]]]:
        return {node: (id(units[unit][0]), units[unit][1]) for node, unit in owner.items()}

    assert by_statement(owner, units) == by_statement(*statement_units(module)) == by_statement(*_reference_units(module))


def _node_classes() -> list[type]:
    """Every node class libcst defines (its subclasses of CSTNode, all modules)."""
    found, stack = set(), [cst.CSTNode]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub.__module__.startswith("libcst.") and sub not in found:
                found.add(sub)
                stack.append(sub)
    return sorted((c for c in found if dataclasses.is_dataclass(c)), key=lambda c: (c.__module__, c.__qualname__))


def test_the_fields_the_walker_skips_carry_no_code() -> None:
    classes = _node_classes()
    assert len(classes) > 150
    skipped_kinds: set[type] = set()
    for node_type in classes:
        hints = typing.get_type_hints(node_type)
        walked = walk_module._fields(node_type)
        for field in dataclasses.fields(node_type):
            kinds = walk_module.node_types(hints[field.name])
            if field.name in walked:
                assert kinds, (node_type, field.name)  # a walked field can hold a node
            else:
                # Nothing but whitespace and punctuation: no node the walker visits.
                assert all(issubclass(k, walk_module.TRIVIA) for k in kinds), (node_type, field.name, kinds)
                skipped_kinds |= kinds
    assert cst.Comma in skipped_kinds and cst.BaseBinaryOp not in skipped_kinds


def test_the_walker_visits_every_node_libcsts_visitor_visits_but_trivia() -> None:
    text = "async def f(a, b):\n    async for x in y: c = a + b - (x * 2)\n    return [i async for i in z if not i] and -a\n"
    module = cst.parse_module(text)
    seen: list[str] = []

    class Theirs(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if not isinstance(node, walk_module.TRIVIA):
                seen.append(type(node).__name__)
            return True

    module.visit(Theirs())
    names = sorted(set(seen))
    ours = type("Ours", (), {f"visit_{n}": (lambda self, node: self.found.append(type(node).__name__)) for n in names})()
    ours.found = []  # type: ignore[attr-defined]
    walk_module.walk(module, ours)
    assert sorted(ours.found) == sorted(seen)  # type: ignore[attr-defined]
    assert seen.count("Add") == 1 and seen.count("Asynchronous") == 3 and "Not" in seen


@pytest.mark.parametrize("hook", ["visit_Comma", "leave_SimpleWhitespace", "visit_Call_lpar", "leave_Arg_comma"])
def test_the_walker_refuses_a_hook_it_would_never_call(hook: str) -> None:
    visitor_type = type("Refused", (), {hook: lambda self, node: None})
    with pytest.raises(TypeError, match="never"):
        walk_module.walk(cst.parse_module("f(a, b)\n"), visitor_type())
    with pytest.raises(TypeError, match="never"):
        walk_module.walk_units(cst.parse_module("f(a, b)\n"), visitor_type())


def test_libcsts_own_no_op_hooks_are_not_refused() -> None:
    class Visitor(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            self.names = getattr(self, "names", 0) + 1

    visitor = Visitor()
    walk_module.walk(cst.parse_module("f(a, b)\n"), visitor)
    assert visitor.names == 3
