"""Every test can fail: each ``test_*`` function asserts, expects an exception
or a warning (``pytest.raises`` / ``pytest.warns``), fails explicitly, or
calls a helper of the tests that does.  A test that cannot fail is worse
than none: it reads as coverage."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parent
#: ``pytest.<name>`` that make a test fail.
FAILING = frozenset({"raises", "warns", "deprecated_call", "fail"})


def files_of_the_tests() -> list[Path]:
    """Every Python file of the tests, the code under test fixtures left out."""
    return sorted(p for p in TESTS.rglob("*.py") if "fixtures" not in p.relative_to(TESTS).parts)


@dataclass
class Function:
    """One function of the tests: whether it fails by itself, and what it calls."""

    where: str
    fails: bool = False
    calls: set[str] = field(default_factory=set)  # plain names, in this module or imported into it
    methods: set[str] = field(default_factory=set)  # ``obj.name(...)`` on something not a module


def _module_names(tree: ast.Module) -> set[str]:
    """Names bound by ``import x`` / ``import x as y``: their attributes are
    library calls (``subprocess.run``), never a method of the tests."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def _pytest_aliases(tree: ast.Module) -> tuple[set[str], set[str]]:
    """How the module names pytest, and the failing functions it imported by name."""
    modules, direct = {"pytest"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.asname or alias.name for alias in node.names if alias.name == "pytest")
        elif isinstance(node, ast.ImportFrom) and node.module == "pytest":
            direct.update(alias.asname or alias.name for alias in node.names if alias.name in FAILING)
    return modules, direct


def _summarise(fn: ast.FunctionDef | ast.AsyncFunctionDef, where: str, modules: set[str],
               pytest_names: set[str], pytest_direct: set[str]) -> Function:
    out = Function(where)
    # A nested function counts only if the test names it (calls it, or
    # hands it to a monkeypatch that the code under test calls).
    nested = {n.name: n for n in ast.walk(fn) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n is not fn}
    named = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    skipped = {id(n) for name, f in nested.items() if name not in named for n in ast.walk(f)}
    for node in ast.walk(fn):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Assert):
            out.fails = True
        elif isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id == "AssertionError":
                out.fails = True
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in pytest_names:
                out.fails |= func.attr in FAILING
            elif isinstance(func, ast.Name):
                if func.id in pytest_direct:
                    out.fails = True
                out.calls.add(func.id)
            elif isinstance(func, ast.Attribute):
                receiver = func.value
                if not (isinstance(receiver, ast.Name) and receiver.id in modules):
                    out.methods.add(func.attr)
    return out


@dataclass
class Module:
    functions: dict[str, Function] = field(default_factory=dict)  # module level, by name
    tests: list[Function] = field(default_factory=list)
    imported: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (module, name there)


def read(path: Path, root: Path) -> tuple[Module, dict[str, list[Function]]]:
    """A test module's functions, and its classes' methods by name."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    rel = path.relative_to(root.parent).as_posix()
    modules = _module_names(tree)
    pytest_names, pytest_direct = _pytest_aliases(tree)
    module = Module()
    methods: dict[str, list[Function]] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests"):
            for alias in node.names:
                module.imported[alias.asname or alias.name] = (node.module, alias.name)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fn = _summarise(node, f"{rel}:{node.lineno} {node.name}", modules, pytest_names, pytest_direct)
            module.functions[node.name] = fn
            if node.name.startswith("test"):
                module.tests.append(fn)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    fn = _summarise(item, f"{rel}:{item.lineno} {item.name}", modules, pytest_names, pytest_direct)
                    methods.setdefault(item.name, []).append(fn)
                    if node.name.startswith("Test") and item.name.startswith("test"):
                        module.tests.append(fn)
    return module, methods


def offenders(paths: list[Path], root: Path) -> list[str]:
    """``file:line name`` of every test function that cannot fail (``root``: the tests' folder)."""
    modules: dict[str, Module] = {}
    methods: dict[str, list[tuple[Module, Function]]] = {}
    for path in paths:
        dotted = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        module, found = read(path, root)
        modules[dotted] = module
        for name, fns in found.items():
            methods.setdefault(name, []).extend((module, fn) for fn in fns)

    def callees(module: Module, fn: Function) -> list[Function]:
        out = [m for name in fn.methods for _, m in methods.get(name, ())]
        for name in fn.calls:
            if name in module.functions:
                out.append(module.functions[name])
            elif name in module.imported:
                source, there = module.imported[name]
                target = modules.get(source)
                if target is not None and there in target.functions:
                    out.append(target.functions[there])
        return out

    owners = [(m, fn) for m in modules.values() for fn in [*m.functions.values(), *m.tests]]
    owners += [pair for pairs in methods.values() for pair in pairs]
    changed = True
    while changed:  # whether each function fails, through the helpers it calls
        changed = False
        for module, fn in owners:
            if not fn.fails and any(c.fails for c in callees(module, fn)):
                fn.fails = changed = True
    return sorted(fn.where for m in modules.values() for fn in m.tests if not fn.fails)


def test_every_test_function_can_fail():
    found = offenders(files_of_the_tests(), TESTS)
    assert not found, "tests that neither assert, raise nor call a helper that does:\n" + "\n".join(found)


def test_the_check_finds_a_test_that_cannot_fail(tmp_path):
    # The check itself can fail: a test that only runs code is found, one
    # that asserts through a helper or pytest.raises is not.
    sample = tmp_path / "tests" / "test_sample.py"
    sample.parent.mkdir()
    sample.write_text(
        "import subprocess\n"
        "import pytest\n\n"
        "def check(x):\n    assert x\n\n"
        "class Runner:\n    def run(self):\n        check(1)\n\n"
        "def test_runs_only():\n    subprocess.run(['true'])\n\n"
        "def test_helper():\n    check(2)\n\n"
        "def test_method(cli):\n    cli.run()\n\n"
        "def test_raises():\n    with pytest.raises(ValueError):\n        int('x')\n\n"
        "def test_unused_nested():\n    def inner():\n        assert False\n\n"
        "class TestGroup:\n    def test_in_class(self):\n        print(1)\n"
    )
    assert offenders([sample], sample.parent) == [
        "tests/test_sample.py:11 test_runs_only",
        "tests/test_sample.py:24 test_unused_nested",
        "tests/test_sample.py:29 test_in_class",
    ]
