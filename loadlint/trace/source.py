"""Back from the trace to the code: which ``DataLoader(...)`` call the run
iterated, how sure that is, and that call's static findings and fixes.

The project is read with ``ast``, never imported or run.  Evidence, best
first: the Python frames of a ``with_stack=True`` trace name the function
that iterates the loader; without them, the iterator class says whether the
loader has workers, and a project's entry script (the file with a
``__main__`` guard) says which loader training iterates.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from loadlint.trace.findings import MULTI, SINGLE

_FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<function>.+)$")
_SKIP_DIRS = frozenset({".git", ".venv", "venv", "site-packages", "node_modules", "__pycache__", ".tox", "build", "dist"})
_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "zip"})


@dataclass(frozen=True)
class LoaderCall:
    path: Path
    row: int
    column: int
    end_row: int
    #: the enclosing function's name, first and last line; None at module level
    function: tuple[str, int, int] | None
    #: the literal num_workers (0 when missing), None when not a literal
    workers: int | None
    iterated_in: tuple[tuple[str, int, int] | None, ...]
    entry: bool


@dataclass(frozen=True)
class Match:
    call: LoaderCall
    confidence: str  # "high", "medium" or "low"
    why: str


def _python_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    return sorted(p for p in root.rglob("*.py") if not _SKIP_DIRS & set(p.relative_to(root).parts[:-1]))


def _is_loader(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == "DataLoader") or (isinstance(func, ast.Attribute) and func.attr == "DataLoader")


def _workers(call: ast.Call) -> int | None:
    for kw in call.keywords:
        if kw.arg == "num_workers":
            value = kw.value
            return value.value if isinstance(value, ast.Constant) and isinstance(value.value, int) else None
        if kw.arg is None:
            return None  # **kwargs may hold it
    return 0 if len(call.args) < 12 else None


def _target(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def _iterated(expr: ast.AST) -> ast.AST:
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in _WRAPPERS and expr.args:
        expr = expr.args[0]
    return expr


class _Scan(ast.NodeVisitor):
    def __init__(self) -> None:
        self.function: tuple[str, int, int] | None = None
        self.calls: list[tuple[ast.Call, tuple[str, int, int] | None, str | None]] = []
        #: (name iterated, function iterating it)
        self.loops: list[tuple[str | None, ast.AST, tuple[str, int, int] | None]] = []
        self.entry = False

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer, self.function = self.function, (node.name, node.lineno, node.end_lineno or node.lineno)
        self.generic_visit(node)
        self.function = outer

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node: ast.Assign) -> None:
        if _is_loader(node.value):
            assert isinstance(node.value, ast.Call)
            self.calls.append((node.value, self.function, _target(node.targets[0])))
            self.generic_visit(node.value)
            return
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if _is_loader(node):
            self.calls.append((node, self.function, None))
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        inner = _iterated(node.iter)
        self.loops.append((_target(inner), inner, self.function))
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"):
            self.entry = True
        self.generic_visit(node)


def loader_calls(root: Path) -> list[LoaderCall]:
    """Every ``DataLoader(...)`` call under ``root`` and where it is iterated."""
    found: list[LoaderCall] = []
    for path in _python_files(root):
        try:
            tree = ast.parse(path.read_bytes(), str(path))
        except (SyntaxError, ValueError, OSError):
            continue
        scan = _Scan()
        scan.visit(tree)
        for call, function, target in scan.calls:
            iterated = tuple(fn for name, expr, fn in scan.loops if (target and name == target) or expr is call)
            found.append(LoaderCall(path, call.lineno, call.col_offset + 1, call.end_lineno or call.lineno, function,
                                    _workers(call), iterated, scan.entry))
    return found


def _compatible(call: LoaderCall, iterators: list[str]) -> bool:
    if call.workers is None:
        return True
    return (SINGLE in iterators and call.workers == 0) or (MULTI in iterators and call.workers > 0)


def _frame(frame: str) -> tuple[str, int, str] | None:
    m = _FRAME.match(frame)
    return (m["file"], int(m["line"]), m["function"]) if m else None


def match(root: Path, iterators: list[str], callers: list[str]) -> Match | None:
    """The loader call the trace's run iterated, or None."""
    calls = loader_calls(root)
    for caller in callers:
        frame = _frame(caller)
        if frame is None:
            continue
        file, line, function = frame
        in_file = [c for c in calls if c.path.as_posix().endswith(file.lstrip("./"))]
        # A frame's line is its function's first line, or for a frame
        # already running when profiling began, the line it was at then.
        here = [c for c in in_file if any(fn is not None and fn[0] == function and fn[1] <= line <= fn[2] for fn in c.iterated_in)
                or (line == 1 and function == "<module>" and None in c.iterated_in)]
        picked = [c for c in here if _compatible(c, iterators)] or here
        if len(picked) == 1:
            return Match(picked[0], "high", f"the trace's Python stack: {caller} iterates it")
        candidates = [c for c in in_file if _compatible(c, iterators)]
        if len(candidates) == 1:
            return Match(candidates[0], "medium", f"the trace's Python stack: {caller} iterates a loader built here")
    compatible = [c for c in calls if _compatible(c, iterators)]
    if not compatible:
        return None
    iterated = [c for c in compatible if c.iterated_in]
    entry = [c for c in iterated if c.entry]
    kind = "without workers" if SINGLE in iterators else "with workers"
    for pool, how in ((entry, "the entry script iterates it"), (iterated, "the project iterates it")):
        if len(pool) == 1:
            return Match(pool[0], "medium", f"the only DataLoader {kind} that {how}")
    best = entry or iterated or compatible
    return Match(best[0], "low", f"first of {len(best)} DataLoader calls {kind} that could be it")
