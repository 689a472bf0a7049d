"""Back from the trace to the code: which ``DataLoader(...)`` call the run
iterated, how sure that is, and that call's static findings and fixes.

The project is read with ``ast``, never imported or run, and as ``check``
reads it: through the guarded reader (regular files only, no link out of
the folder, 64 MiB at most), past the same pre-filter (a file that builds no
DataLoader is not parsed), with a bound on what is parsed and files too
deeply nested to parse skipped.  Evidence, best
first: the Python frames of a ``with_stack=True`` trace name the function
that iterates the loader; without them, the iterator class says whether the
loader has workers, and a project's entry script (the file with a
``__main__`` guard) says which loader training iterates.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path

from loadlint.cst.slicing import MAX_PARSE, SLICE_ABOVE, logical_lines
from loadlint.facts.signature import DEFAULTS, POSITIONAL
from loadlint.sources.files import read_source
from loadlint.sources.prefilter import passes_prefilter
from loadlint.sources.source import LINE_BREAK, DecodeError, decode
from loadlint.trace.findings import MULTI, SINGLE

_FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<function>.+)$")
_SKIP_DIRS = frozenset({".git", ".venv", "venv", "site-packages", "node_modules", "__pycache__", ".tox", "build", "dist"})
_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "zip"})


_Function = tuple[str, int, int]  # name, first and last line


@dataclass(frozen=True)
class LoaderSite:
    """A DataLoader call in the source, as a trace event is mapped onto it."""

    path: Path
    row: int
    column: int
    end_row: int
    #: the enclosing function's name, first and last line; None at module level
    function: _Function | None
    #: the literal num_workers (0 when missing), None when not a literal
    workers: int | None
    #: the literal pin_memory (False when missing), None when not a literal
    pinned: bool | None
    iterated_in: tuple[_Function | None, ...]
    entry: bool


@dataclass(frozen=True)
class Match:
    call: LoaderSite
    confidence: str  # "high", "medium" or "low"
    why: str


def _python_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    found: list[Path] = []
    # Linked folders are not entered: what a repository links to is not the repository's.
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        found.extend(Path(folder, name) for name in files if name.endswith(".py"))
    return sorted(found)


def _is_loader(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == "DataLoader") or (isinstance(func, ast.Attribute) and func.attr == "DataLoader")


def _literal(call: ast.Call, keyword: str, kind: type) -> object:
    """An argument's literal value, its default when absent, None when not
    a literal (or hidden in ``*args``/``**kwargs``)."""
    for kw in call.keywords:
        if kw.arg == keyword:
            return _constant(kw.value, kind)
    position = POSITIONAL.index(keyword)
    if any(isinstance(arg, ast.Starred) for arg in call.args[: position + 1]):
        return None
    if position < len(call.args):
        return _constant(call.args[position], kind)
    if any(kw.arg is None for kw in call.keywords):
        return None  # **kwargs may hold it
    return DEFAULTS[keyword]


def _constant(value: ast.expr, kind: type) -> object:
    return value.value if isinstance(value, ast.Constant) and type(value.value) is kind else None


def _workers(call: ast.Call) -> int | None:
    value = _literal(call, "num_workers", int)
    return value if isinstance(value, int) else None


def _pinned(call: ast.Call) -> bool | None:
    value = _literal(call, "pin_memory", bool)
    return value if isinstance(value, bool) else None


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
        self.function: _Function | None = None
        self.calls: list[tuple[ast.Call, _Function | None, str | None]] = []
        #: (name iterated, the iterated expression, function iterating it)
        self.loops: list[tuple[str | None, ast.AST, _Function | None]] = []
        self.params: dict[_Function, list[str]] = {}
        #: (callee's name, via an attribute, argument names, keyword -> name, caller)
        self.invocations: list[tuple[str, bool, list[str | None], dict[str, str | None], _Function | None]] = []
        self.entry = False

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer, self.function = self.function, (node.name, node.lineno, node.end_lineno or node.lineno)
        self.params[self.function] = [a.arg for a in node.args.posonlyargs + node.args.args]
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
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name is not None:
            self.invocations.append((name, isinstance(func, ast.Attribute), [_target(a) for a in node.args],
                                     {k.arg: _target(k.value) for k in node.keywords if k.arg}, self.function))
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

    def passed_in(self, loop_name: str, function: _Function) -> list[tuple[str, _Function | None]]:
        """(name, caller) of what the calls of ``function`` in this file pass
        as its parameter ``loop_name``."""
        params = self.params.get(function, [])
        if loop_name not in params:
            return []
        index = params.index(loop_name)
        found = []
        for callee, via_attribute, args, keywords, caller in self.invocations:
            if callee != function[0]:
                continue
            shift = 1 if via_attribute and params[:1] in (["self"], ["cls"]) else 0
            name = keywords.get(loop_name) or (args[index - shift] if 0 <= index - shift < len(args) else None)
            if name is not None:
                found.append((name, caller))
        return found


def _iterations(scan: _Scan, call: ast.Call, function: _Function | None, target: str | None) -> tuple[_Function | None, ...]:
    """The functions (None: module level) whose loops iterate the loader
    built by ``call``: directly, or through a parameter of a function this
    file calls with it."""
    found: list[_Function | None] = []
    for name, expr, loop_fn in scan.loops:
        if expr is call:
            found.append(loop_fn)
        elif target is not None and name == target and (loop_fn == function or function is None or target.startswith("self.")):
            found.append(loop_fn)
        elif target is not None and name is not None and loop_fn is not None:
            if any(passed == target and caller == function for passed, caller in scan.passed_in(name, loop_fn)):
                found.append(loop_fn)
    return tuple(found)


#: A logical line this long that names no DataLoader is data (a table, an
#: embedded blob): it is left out of the parse, as a ``pass``.
_DATA_LINE = 10_000
_COMPOUND = re.compile(r"[ \t]*(?:@|(?:def|class|if|elif|else|for|while|with|try|except|finally|async|match|case)\b)")


def _bounded(text: str) -> str | None:
    """``text`` with its long data lines left out (rows unchanged), or None
    when what remains is more than ``check`` parses."""
    if len(text) <= SLICE_ABOVE:
        return text
    pieces: list[str] = []
    kept = 0
    for begin, end in logical_lines(text):
        if end - begin > _DATA_LINE and text.find("DataLoader", begin, end) < 0 and not _COMPOUND.match(text, begin):
            breaks = "".join(LINE_BREAK.findall(text, begin, end))
            head = text[begin:begin + 256]
            indent = head[: len(head) - len(head.lstrip(" \t"))]
            # A comment may sit at any indentation; a statement's place needs one.
            pieces.append(breaks if head.lstrip(" \t").startswith("#") else indent + "pass" + breaks)
            continue
        kept += end - begin
        if kept > MAX_PARSE:
            return None
        pieces.append(text[begin:end])
    return "".join(pieces)


def _parse(path: Path, within: str | None) -> ast.Module | None:
    """The file's tree, or None where ``check`` would not analyse it either."""
    try:
        data = read_source(path, within)
    except OSError:
        return None
    if not passes_prefilter(data):
        return None
    try:
        text = _bounded(decode(data).text)
        return ast.parse(text, str(path)) if text is not None else None
    except (DecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def loader_calls(root: Path, within: str | None = None) -> list[LoaderSite]:
    """Every ``DataLoader(...)`` call under ``root`` and where it is iterated.
    Links must stay in ``within`` (default: ``root`` when it is a folder; a
    file the user names is read wherever it is)."""
    found: list[LoaderSite] = []
    if within is None and not root.is_file():
        within = str(root)
    for path in _python_files(root):
        tree = _parse(path, within)
        if tree is None:
            continue
        scan = _Scan()
        try:
            scan.visit(tree)
        except RecursionError:
            continue  # as check reports LL900: too deeply nested to analyse
        for call, function, target in scan.calls:
            found.append(LoaderSite(path, call.lineno, call.col_offset + 1, call.end_lineno or call.lineno, function,
                                    _workers(call), _pinned(call), _iterations(scan, call, function, target), scan.entry))
    return found


def _compatible(call: LoaderSite, iterators: list[str]) -> bool:
    if call.workers is None:
        return True
    return (SINGLE in iterators and call.workers == 0) or (MULTI in iterators and call.workers > 0)


def _frame(frame: str) -> tuple[str, int, str] | None:
    m = _FRAME.match(frame)
    return (m["file"], int(m["line"]), m["function"]) if m else None


def _prefer(calls: list[LoaderSite], pinned: bool | None) -> list[LoaderSite]:
    """Those whose literal pin_memory agrees with the trace's copies (pinned
    or pageable), when any; a hint, not a filter: other tensors than the
    batch may be copied."""
    agreeing = [c for c in calls if pinned is None or c.pinned is None or c.pinned == pinned]
    return agreeing or calls


def match(root: Path, iterators: list[str], callers: list[str], pinned: bool | None = None,
          within: str | None = None) -> Match | None:
    """The loader call the trace's run iterated, or None.  ``pinned``: whether
    the trace's host-to-device copies are mostly pinned (None: no copies);
    ``within``: as for ``loader_calls``."""
    calls = loader_calls(root, within)
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
        picked = _prefer([c for c in here if _compatible(c, iterators)] or here, pinned)
        if len(picked) == 1:
            return Match(picked[0], "high", f"the trace's Python stack: {caller} iterates it")
        candidates = _prefer([c for c in in_file if _compatible(c, iterators)], pinned)
        if len(candidates) == 1:
            return Match(candidates[0], "medium", f"the trace's Python stack: {caller} iterates a loader built here")
    compatible = _prefer([c for c in calls if _compatible(c, iterators)], pinned)
    if not compatible:
        return None
    iterated = [c for c in compatible if c.iterated_in]
    entry = [c for c in iterated if c.entry]
    kind = "without workers" if SINGLE in iterators else "with workers"
    if pinned is not None:
        kind += ", pinned" if pinned else ", not pinned"
    for pool, how in ((entry, "the entry script iterates"), (iterated, "the project iterates")):
        if len(pool) == 1:
            return Match(pool[0], "medium", f"the only DataLoader ({kind}) that {how}")
    best = entry or iterated or compatible
    return Match(best[0], "low", f"first of {len(best)} DataLoader calls ({kind}) that could be it")
