"""DataLoader's signature is written once (``loadlint.facts.signature``):
a second copy of its positional parameters, or an argument's slot written
as a number beside its name, fails here.  trace's source mapping kept such
a copy (``num_workers`` read from slot 6, which is ``collate_fn``'s), so
``DataLoader(ds, 32, True, None, None, 4)`` read as ``num_workers=0``."""

from __future__ import annotations

import ast
from pathlib import Path

from loadlint.facts.signature import DEFAULTS, POSITIONAL

PACKAGE = Path(__file__).resolve().parent.parent / "loadlint"
HOME = PACKAGE / "facts" / "signature.py"
#: Three parameters in their positional order are a copy of the signature.
RUN = 3


def _strings(nodes: list[ast.expr | None]) -> list[str]:
    return [n.value if isinstance(n, ast.Constant) and isinstance(n.value, str) else "" for n in nodes]


def _slot(value: object, name: str) -> bool:
    """A number that may be ``name``'s positional slot: not its default."""
    return type(value) is int and 0 < value < len(POSITIONAL) and value != DEFAULTS.get(name)


def copies(text: str) -> list[str]:
    """Where ``text`` writes the signature again: ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
            words = _strings(list(node.keys) if isinstance(node, ast.Dict) else list(node.elts))
            for i in range(len(words) - RUN + 1):
                if words[i] in POSITIONAL:
                    start = POSITIONAL.index(words[i])
                    if tuple(words[i : i + RUN]) == POSITIONAL[start : start + RUN]:
                        found.append(f"{node.lineno}: the parameters in order from {words[i]!r}")
                        break
        if isinstance(node, ast.Call):
            values = [*node.args, *(k.value for k in node.keywords)]
            numbers = [v.value for v in values if isinstance(v, ast.Constant)]
            for name in _strings(values):
                if name in POSITIONAL and any(_slot(n, name) for n in numbers):
                    found.append(f"{node.lineno}: {name!r} beside a slot number")
        if isinstance(node, ast.stmt):
            own = list(_own(node))
            named = {n.value for n in own if isinstance(n, ast.Constant) and n.value in POSITIONAL}
            slots = [slot for slot in map(_args_slot, own) if slot is not None]
            if named and slots:
                found.append(f"{node.lineno}: {sorted(named)[0]!r} read from a call's slot {slots[0]}")
    return found


def _own(statement: ast.stmt) -> list[ast.AST]:
    """The statement's expressions, not those of the statements in its body."""
    out: list[ast.AST] = []
    stack = [c for c in ast.iter_child_nodes(statement) if not isinstance(c, ast.stmt)]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.stmt))
    return out


def _args_slot(node: ast.AST) -> int | None:
    """N of ``<call>.args[N]``, N a slot after the dataset's."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "args":
        index = node.slice
        if isinstance(index, ast.Constant) and type(index.value) is int and index.value > 0:
            return index.value
    return None


def test_the_signature_is_written_once() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{where}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != HOME
        for where in copies(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_the_home_holds_the_signature() -> None:
    # The detector reads its own home as a copy: it knows what to look for.
    assert copies(HOME.read_text(encoding="utf-8"))[0].endswith("the parameters in order from 'dataset'")


def test_the_copy_detector_finds_copies() -> None:
    assert copies('P = ("sampler", "batch_sampler", "num_workers")\n') == [
        "1: the parameters in order from 'sampler'"
    ]
    assert copies('D = {"x": 1, "shuffle": None, "sampler": None, "batch_sampler": None}\n') == [
        "1: the parameters in order from 'shuffle'"
    ]
    # trace's copy, off by one: num_workers is slot 5 and pin_memory slot 7.
    assert copies('v = _literal(call, "num_workers", 6, int, 0)\np = _literal(call, "pin_memory", 8, bool, False)\n') == [
        "1: 'num_workers' beside a slot number", "2: 'pin_memory' beside a slot number",
    ]
    assert copies('workers = call.args[5] if len(call.args) > 5 else kw.get("num_workers")\n') == [
        "1: 'num_workers' read from a call's slot 5"
    ]


def test_the_copy_detector_leaves_other_code_alone() -> None:
    text = (
        'value = call.value("batch_size", 1)\n'  # a default, not a slot
        'keys = ("num_workers", "pin_memory", "persistent_workers")\n'  # not in positional order
        'first = call.args[0]\n'  # the dataset, whatever the signature
        'indices = target.args[1].value\n'  # another call's slot, no parameter of DataLoader named
        'message = "dataset, batch_size, shuffle"\n'
    )
    assert copies(text) == []
