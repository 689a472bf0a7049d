"""The import contract of ``loadlint/``, checked over the real import graph.

The graph is read with ``ast`` from every file, so imports inside functions
and under ``if TYPE_CHECKING:`` count like any other: an import hidden in a
function still makes a cycle. Relative imports are resolved.

The layers and the static core are read from ``[tool.importlinter]`` in
pyproject.toml, where they are written once.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "loadlint"

def _contracts() -> list[dict[str, object]]:
    with open(REPO / "pyproject.toml", "rb") as handle:
        return list(tomllib.load(handle)["tool"]["importlinter"]["contracts"])


def _contract(kind: str, about: str) -> dict[str, object]:
    return next(c for c in _contracts() if c["type"] == kind and about in str(c["name"]))


#: Top to bottom, read from pyproject.toml's layers contract (written once,
#: there). A module may import modules of its own layer or of a lower one,
#: never of a higher one (mutual imports within a layer are cycles, which
#: ``test_no_import_cycle`` forbids). Names are relative to ``loadlint``; a
#: name covers its submodules; ``__init__`` is ``loadlint/__init__.py``.
LAYERS: list[tuple[str, ...]] = [
    tuple(name.strip() for name in str(line).split(":")) for line in _contract("layers", "Layers")["layers"]  # type: ignore[attr-defined]
] + [("__init__",)]

#: The static core, read from the forbidden contract: it never imports these.
_CORE_CONTRACT = _contract("forbidden", "static core")
CORE = tuple(str(m).removeprefix("loadlint.") for m in _CORE_CONTRACT["source_modules"])  # type: ignore[attr-defined]
FORBIDDEN_IN_CORE = tuple(str(m) for m in _CORE_CONTRACT["forbidden_modules"])  # type: ignore[attr-defined]
MAX_LINES = 600

#: The entry points reach the analysis only through ``loadlint.api``; the
#: plain-data modules the contract's ``ignore_imports`` names excepted.
_FACADE = _contract("forbidden", "facade")


@dataclass(frozen=True)
class Import:
    """One import statement's target, as written and as resolved."""

    importer: str  # dotted module name, e.g. ``loadlint.frontends.cli``
    target: str  # the imported module (``from m import f``: ``m``, or ``m.f`` when that is a module)
    name: str | None  # the name taken by ``from m import name``
    line: int

    @property
    def where(self) -> str:
        return f"{module_path(self.importer)}:{self.line}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def module_path(module: str) -> str:
    return MODULES[module].relative_to(REPO).as_posix()


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(module: str) -> list[Import]:
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append(Import(module, sub if sub in MODULES else base, alias.name, node.lineno))
    return found


IMPORTS: list[Import] = [imp for module in MODULES for imp in imports_of(module)]


def internal(target: str) -> str | None:
    """The loadlint module an import target lands in (``a.b.c`` -> ``a.b`` when
    ``c`` is a name in ``a/b.py``), or None outside loadlint."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def graph() -> dict[str, dict[str, Import]]:
    """importer -> imported -> the first import making that edge."""
    edges: dict[str, dict[str, Import]] = {module: {} for module in MODULES}
    for imp in IMPORTS:
        target = internal(imp.target)
        if target and target != imp.importer:
            edges[imp.importer].setdefault(target, imp)
    return edges


def strongly_connected(edges: dict[str, dict[str, Import]]) -> list[list[str]]:
    """Components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def cycle_path(component: list[str], edges: dict[str, dict[str, Import]]) -> str:
    """One concrete cycle through a component, each step with the import's file and line."""
    members = set(component)
    start = component[0]
    # Breadth-first from start back to start, inside the component.
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier and start not in previous:
        following = []
        for node in frontier:
            for child in sorted(edges[node]):
                if child in members and child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    path = [start]
    node = previous[start]
    while node != start:
        path.append(node)
        node = previous[node]
    path.append(start)
    path.reverse()
    steps = [f"{a} -> {b} ({edges[a][b].where})" for a, b in zip(path, path[1:])]
    return "cycle: " + "; ".join(steps)


def layer_of(module: str) -> int | None:
    relative = "__init__" if module == "loadlint" else module.removeprefix("loadlint.")
    best: tuple[int, int] | None = None  # (length of the matching name, layer)
    for number, names in enumerate(LAYERS):
        for name in names:
            if relative == name or relative.startswith(name + "."):
                if best is None or len(name) > best[0]:
                    best = (len(name), number)
    return None if best is None else best[1]


def in_core(module: str) -> bool:
    relative = module.removeprefix("loadlint.")
    return any(relative == name or relative.startswith(name + ".") for name in CORE)


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports() -> list[str]:
    problems = []
    for imp in IMPORTS:
        target = internal(imp.target)
        if target is None or target == imp.importer:
            continue
        # A private module (``pkg._x``) belongs to its package: its siblings may use it.
        parts = target.split(".")
        for depth, part in enumerate(parts):
            owner = ".".join(parts[:depth])
            if is_private(part) and not (imp.importer == owner or imp.importer.startswith(owner + ".")):
                problems.append(f"{imp.where}: {imp.importer} imports private module {target}")
                break
        # ``from m import _name`` where ``_name`` is not a module of its own.
        taken_module = imp.target in MODULES and imp.target.rpartition(".")[2] == imp.name
        if imp.name and is_private(imp.name) and not taken_module:
            problems.append(f"{imp.where}: {imp.importer} imports private {imp.name} from {target}")
    return sorted(set(problems))


def test_every_module_has_a_layer() -> None:
    unplaced = [module for module in MODULES if layer_of(module) is None]
    assert not unplaced, f"modules missing from LAYERS in {Path(__file__).name}: {unplaced}"


def test_no_import_cycle() -> None:
    edges = graph()
    cycles = [cycle_path(component, edges) for component in strongly_connected(edges)]
    assert not cycles, f"{len(cycles)} import cycles (imports inside functions count):\n" + "\n".join(cycles)


def test_no_private_name_crosses_modules() -> None:
    problems = private_imports()
    assert not problems, f"{len(problems)} private imports across modules:\n" + "\n".join(problems)


def test_no_file_over_the_line_limit() -> None:
    long = [
        f"{module_path(module)}: {n} lines"
        for module, path in MODULES.items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    ]
    assert not long, f"files over {MAX_LINES} lines:\n" + "\n".join(long)


def test_static_core_imports_no_cli_torch_nvml_or_verify() -> None:
    problems = [
        f"{imp.where}: {imp.importer} imports {imp.target}"
        for imp in IMPORTS
        if in_core(imp.importer)
        and any(imp.target == banned or imp.target.startswith(banned + ".") for banned in FORBIDDEN_IN_CORE)
    ]
    assert not problems, "the static core imports what only the entry points may:\n" + "\n".join(problems)


def test_trace_imports_no_torch_nvml_verify_or_monitor() -> None:
    # trace sits with the entry points but runs nothing: only its command
    # (the click frontend) is outside the core's import ban.
    problems = [
        f"{imp.where}: {imp.importer} imports {imp.target}"
        for imp in IMPORTS
        if imp.importer.startswith("loadlint.trace")
        and any(imp.target == banned or imp.target.startswith(banned + ".")
                for banned in ("torch", "pynvml", "loadlint.verify", "loadlint.monitor"))
    ]
    assert not problems, "\n".join(problems)


def _within(module: str, name: str) -> bool:
    return module == name or module.startswith(name + ".")


def _pattern(pattern: str, module: str) -> bool:
    """import-linter's module patterns: ``**`` stands for any modules, ``*`` for one."""
    regex = re.escape(pattern).replace(r"\*\*", r"[\w.]+").replace(r"\*", r"\w+")
    return re.fullmatch(regex, module) is not None


def facade_bypasses(imports: list[Import]) -> list[str]:
    """Imports by the entry points of what they may reach only through ``loadlint.api``."""
    sources = [str(m) for m in _FACADE["source_modules"]]  # type: ignore[attr-defined]
    forbidden = [str(m) for m in _FACADE["forbidden_modules"]]  # type: ignore[attr-defined]
    allowed = [[part.strip() for part in str(rule).split("->")] for rule in _FACADE["ignore_imports"]]  # type: ignore[attr-defined]
    problems = []
    for imp in imports:
        target = internal(imp.target)
        if target is None or not any(_within(imp.importer, source) for source in sources):
            continue
        if any(_within(target, banned) for banned in forbidden) and not any(
            _pattern(importer, imp.importer) and _pattern(imported, target) for importer, imported in allowed
        ):
            problems.append(f"{imp.where}: {imp.importer} imports {target} (use loadlint.api)")
    return sorted(problems)


def test_entry_points_reach_the_analysis_through_the_api() -> None:
    # Imports inside functions and under TYPE_CHECKING count: the language
    # server once reached engine.analysis's internals from inside its handlers.
    problems = facade_bypasses(IMPORTS)
    assert not problems, f"{len(problems)} imports bypass loadlint.api:\n" + "\n".join(problems)


def test_the_facade_check_sees_a_bypass_and_lets_plain_data_through() -> None:
    imports = [
        Import("loadlint.frontends.lsp.documents", "loadlint.engine.analysis", "analyse", 1),
        Import("loadlint.trace.source", "loadlint.facts.loaders", "LoaderCall", 2),
        Import("loadlint.frontends.cli", "loadlint.rules", "CODES", 3),
        Import("loadlint.verify.report", "loadlint.facts.signature", "TUNABLE_DEFAULTS", 4),
        Import("loadlint.frontends.cli", "loadlint.api", "check_paths", 5),
        Import("loadlint.api", "loadlint.engine.analysis", "analyse", 6),
        Import("loadlint.frontends.checking", "loadlint.run.runner", "lint_candidates", 7),
    ]
    assert facade_bypasses(imports) == [
        "loadlint/frontends/checking.py:7: loadlint.frontends.checking imports loadlint.run.runner (use loadlint.api)",
        "loadlint/frontends/lsp/documents.py:1: loadlint.frontends.lsp.documents imports loadlint.engine.analysis (use loadlint.api)",
        "loadlint/trace/source.py:2: loadlint.trace.source imports loadlint.facts.loaders (use loadlint.api)",
    ]


def test_layers_point_one_way() -> None:
    problems = []
    for importer, targets in graph().items():
        for target, imp in targets.items():
            above, below = layer_of(importer), layer_of(target)
            if above is not None and below is not None and below < above:
                problems.append(
                    f"{imp.where}: {importer} (layer {above}: {', '.join(LAYERS[above])}) imports "
                    f"{target} (layer {below}: {', '.join(LAYERS[below])})"
                )
    assert not problems, f"{len(problems)} imports point up the layers:\n" + "\n".join(sorted(problems))


def test_import_linter_contracts() -> None:
    """The same layers as import-linter's contract in pyproject.toml."""
    lint_imports = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(lint_imports).exists():
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([lint_imports, "--no-cache", "--no-logo"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_package_is_installed() -> None:
    # An explicit package list once left new subpackages out of the wheel:
    # the installed CLI then failed with ModuleNotFoundError.
    from setuptools import find_packages

    on_disk = sorted(
        ".".join(init.parent.relative_to(REPO).parts) for init in PACKAGE.rglob("__init__.py")
    )
    assert sorted(find_packages(str(REPO), include=["loadlint", "loadlint.*"])) == on_disk
