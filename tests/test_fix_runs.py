"""Safe means it runs: programs executed before and after `loadlint fix`.

Every fixture, golden project and example, and reduced copies of public
training scripts (tests/fixtures/runs: pytorch/examples super_resolution,
kuangliu/pytorch-cifar, minGPT's demo notebook, Pytorch-UNet's loader
shape), is copied, fixed with the safe fixes (no target declared, as a new
user runs it), and run under fork, spawn and forkserver, with each
command-line worker option at its default and at 0.  No run that worked
before the fix may fail after it.

The fixtures' undefined names (`dataset`, `step`, `model`...) are stand-ins
(tests/fixtures/runs/stubs, loaded in every process of a run, workers
included).  To stay bounded on a small machine: a program whose tree the fix
does not change is not run (it is the same program); one whose imports are
not installed (torchvision, lightning...) is not run; one that fails before
the fix under fork, the most permissive start method, is not run under the
others; a run is repeated before the fix only where it fails after it; each
run has a timeout.  Notebooks run as a kernel would: their code
cells in a process whose `__main__` has no file, so spawned workers cannot
import its classes.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is not installed: the programs cannot run")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
RUNS = FIXTURES / "runs"
STUBS = RUNS / "stubs"
METHODS = ("fork", "spawn", "forkserver")
#: Seconds a run may take before the fix (a program that takes longer is not
#: run further); after it, twice that (a slower run is not a crash).
TIMEOUT = 45

#: Sets the start method, then runs a script as `__main__` (spawned workers
#: import it again from its file) or a notebook's code in `__main__` itself.
RUNNER = """
import multiprocessing, runpy, sys
method, kind, path = sys.argv[1:4]
multiprocessing.set_start_method(method, force=True)
sys.argv = [path, *sys.argv[4:]]
if kind == "script":
    runpy.run_path(path, run_name="__main__")
else:
    exec(compile(open(path, encoding="utf-8").read(), path, "exec"), sys.modules["__main__"].__dict__)
"""


@dataclass(frozen=True)
class Program:
    """An entry point (a script or a notebook) in a tree that is copied whole."""

    name: str
    tree: Path
    entry: str


@dataclass
class Outcome:
    #: Runs that worked after the fix.
    ran: list[str] = field(default_factory=list)
    #: Runs that failed after the fix and before it.
    failing: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def _entries(tree: Path) -> list[str]:
    return sorted(
        str(p.relative_to(tree)) for p in [*tree.rglob("*.py"), *tree.rglob("*.ipynb")]
        if p.name != "__init__.py" and "stubs" not in p.relative_to(tree).parts
    )


def programs() -> list[Program]:
    """Every program of the fixtures, the golden projects, the examples and the reduced public scripts."""
    found = [Program(f"runs/{tree.name}/{entry}", tree, entry) for tree in sorted(RUNS.iterdir())
             if tree.is_dir() and tree.name != "stubs" for entry in _entries(tree)]
    found += [Program(f"examples/{entry}", ROOT / "examples", entry) for entry in _entries(ROOT / "examples")]
    for folder in ("fix", "checker", "notebooks"):
        for path in sorted((FIXTURES / folder).iterdir()):
            if path.suffix in (".py", ".ipynb") and not path.name.endswith(".out.py"):
                found.append(Program(f"{folder}/{path.name}", path, path.name))
    for tree in sorted((FIXTURES / "projects").iterdir()):
        if tree.is_dir():
            found += [Program(f"projects/{tree.name}/{entry}", tree, entry) for entry in _entries(tree)]
    return found


def copy(program: Program, where: Path) -> Path:
    if program.tree.is_dir():
        shutil.copytree(program.tree, where)
    else:
        where.mkdir(parents=True)
        shutil.copyfile(program.tree, where / program.entry)
    return where


def notebook_code(path: Path) -> str:
    """A notebook's code cells, magics and shell lines left out."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    except ValueError:
        return ""  # a malformed notebook runs nothing
    lines = []
    for cell in cells if isinstance(cells, list) else []:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            source = cell.get("source", "")
            text = "".join(source) if isinstance(source, list) else source
            lines += [line for line in text.splitlines() if not line.lstrip().startswith(("%", "!"))]
    return "\n".join(lines) + "\n"


def source_of(tree: Path, entry: str) -> str:
    path = tree / entry
    return notebook_code(path) if path.suffix == ".ipynb" else path.read_text(encoding="utf-8", errors="replace")


def runs_something(tree: Path, entry: str) -> bool:
    """The entry does something when run: a statement at module level beyond
    imports, definitions and assignments of values built without a call."""
    try:
        module = ast.parse(source_of(tree, entry))
    except SyntaxError:
        return False
    quiet = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Pass)
    for statement in module.body:
        if isinstance(statement, quiet):
            continue
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue
        if isinstance(statement, (ast.Assign, ast.AnnAssign)) and not any(
            isinstance(node, ast.Call) for node in ast.walk(statement)
        ):
            continue
        return True
    return False


def missing_import(tree: Path, entry: str) -> str | None:
    """A module the entry imports that is neither installed nor in its tree."""
    try:
        module = ast.parse(source_of(tree, entry))
    except SyntaxError:
        return "it does not parse"
    for node in ast.walk(module):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
        )
        for name in names:
            top = name.split(".")[0]
            if (tree / top).exists() or (tree / f"{top}.py").exists() or (tree / entry).parent.joinpath(f"{top}.py").exists():
                continue
            if importlib.util.find_spec(top) is None:
                return f"`{top}` is not installed"
    return None


#: ``add_argument("--workers", "-j", default=4, ...)``: the options and the call's text.
_OPTION = re.compile(r"add_argument\(\s*((?:['\"]-[^'\"]+['\"]\s*,\s*)+)([^)]*)\)")


def worker_options(source: str) -> list[list[str]]:
    """The command lines to run: the defaults, then each worker option at 0."""
    runs: list[list[str]] = [[]]
    for match in _OPTION.finditer(source):
        options = re.findall(r"['\"](-[^'\"]+)['\"]", match.group(1))
        if any(word in option.lower() for option in options for word in ("worker", "thread")) and re.search(
            r"default\s*=\s*\d", match.group(2)
        ):
            runs.append([options[-1], "0"])
    return runs


def run(tree: Path, entry: str, method: str, argv: list[str], timeout: float) -> tuple[bool, str]:
    path = cwd = tree / entry
    kind = "script"
    if path.suffix == ".ipynb":
        # The cells' code, beside the tree: the fix's copy compares trees.
        kind, path = "notebook", tree.parent / f"{tree.name}-{path.stem}.cells.py"
        path.write_text(notebook_code(cwd), encoding="utf-8")
    env = {**os.environ, "RUN_STUBS": "1", "PYTHONPATH": os.pathsep.join([str(STUBS), str(cwd.parent)]),
           "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", RUNNER, method, kind, str(path), *argv],
            cwd=cwd.parent, env=env, capture_output=True, text=True, timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout:.0f} s"
    return proc.returncode == 0, (proc.stderr or proc.stdout)[-4000:]


def fix(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loadlint", "fix", "--no-cache", "."], cwd=tree,
                          capture_output=True, text=True)


def changed(before: Path, after: Path) -> bool:
    files = {p.relative_to(before) for p in before.rglob("*") if p.is_file()}
    files |= {p.relative_to(after) for p in after.rglob("*") if p.is_file()}
    return any(
        not (before / f).exists() or not (after / f).exists() or (before / f).read_bytes() != (after / f).read_bytes()
        for f in files
    )


def compare(program: Program, before: Path, after: Path, outcome: Outcome, methods: tuple[str, ...] = METHODS) -> None:
    """Run the program after the fix under each start method and command
    line, and where that fails, before it: a failure the fix did not cause is
    not a regression.  A program that fails both ways under fork, with its
    defaults, is not run further."""
    for method in methods:
        for argv in worker_options(source_of(before, program.entry)):
            label = f"{program.name} [{method}{' ' + ' '.join(argv) if argv else ''}]"
            ok, why = run(after, program.entry, method, argv, 2 * TIMEOUT)
            if not ok and why.startswith("timed out"):
                # A busy machine is not a crash: once more, with time to spare.
                ok, why = run(after, program.entry, method, argv, 4 * TIMEOUT)
            if ok:
                outcome.ran.append(label)
                continue
            worked, before_why = run(before, program.entry, method, argv, TIMEOUT)
            if worked:
                outcome.broken.append(f"{label}: ran before the fix, fails after it: {why}")
            elif (method, argv) == ("fork", []):
                last = before_why.strip().splitlines()[-1:] or ["no output"]
                outcome.skipped[program.name] = f"fails before the fix under fork: {last[0]}"
                return
            else:
                outcome.failing.append(label)


def prepare(programs: list[Program], where: Path) -> dict[Path, tuple[Path, Path, bool]]:
    """Each program's tree before and after the fix, and whether the fix changed it."""
    trees: dict[Path, tuple[Path, Path]] = {}
    for index, program in enumerate(programs):
        if program.tree not in trees:
            # A file of its own is fixed in its own folder: a project of one module.
            kind = "after" if program.tree.is_dir() else "singles"
            trees[program.tree] = (copy(program, where / "before" / str(index)),
                                   copy(program, where / kind / str(index)))
    # The projects are fixed one by one (each has its configuration); the
    # single files together, each alone in its folder (one start of loadlint).
    singles = [after for tree, (_, after) in trees.items() if not tree.is_dir()]
    folders = [after for tree, (_, after) in trees.items() if tree.is_dir()]
    for folder in singles:
        folder.joinpath("pyproject.toml").write_text("[tool.loadlint]\n", encoding="utf-8")
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(fix, [*folders, where / "singles"] if singles else folders))
    for proc in done:
        assert proc.returncode in (0, 1), f"loadlint fix failed: {proc.stderr}"
    for folder in singles:
        folder.joinpath("pyproject.toml").unlink()
    return {tree: (before, after, changed(before, after)) for tree, (before, after) in trees.items()}


def test_no_safe_fix_breaks_a_run(tmp_path):
    outcome = Outcome()
    listed = programs()
    trees = prepare(listed, tmp_path)
    jobs = []
    for program in listed:
        before, after, differs = trees[program.tree]
        if not differs:
            outcome.skipped[program.name] = "the fix changes nothing in its tree"
            continue
        if not runs_something(before, program.entry):
            outcome.skipped[program.name] = "it only defines things"
            continue
        why = missing_import(before, program.entry)
        if why is not None:
            outcome.skipped[program.name] = why
            continue
        jobs.append((program, before, after))
    # Two at a time: each run starts torch, and workers start it again.
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda job: compare(*job, outcome), jobs))
    report = "\n".join(["ran after the fix:", *sorted(outcome.ran), "failed before and after:", *sorted(outcome.failing),
                        "not run:", *(f"{k}: {v}" for k, v in sorted(outcome.skipped.items()))])
    print(report)
    assert outcome.broken == [], "\n".join(outcome.broken)
    ran = {label.split(" [")[0] for label in outcome.ran}
    # The public scripts and the examples do run both ways, or the harness proves nothing.
    for name in ("runs/super_resolution/main.py", "runs/pytorch_cifar/main.py", "runs/segmentation/train.py",
                 "examples/train_cpu.py"):
        assert name in ran, f"{name} did not run:\n{report}"
    # The option at 0 keeps working; guarded scripts run under spawn with the workers the fix added.
    for label in ("runs/super_resolution/main.py [fork --threads 0]", "runs/segmentation/train.py [spawn]",
                  "examples/train_cpu.py [spawn]", "examples/train_cpu.py [forkserver]"):
        assert label in outcome.ran, report


def test_the_harness_sees_a_fix_that_breaks_a_run(tmp_path):
    # The fix super_resolution used to get: persistent workers whatever the count.
    program = Program("runs/super_resolution/main.py", RUNS / "super_resolution", "main.py")
    before = copy(program, tmp_path / "before")
    after = copy(program, tmp_path / "after")
    main = after / "main.py"
    text = main.read_text(encoding="utf-8")
    main.write_text(text.replace("shuffle=True)", "shuffle=True, persistent_workers=True)"), encoding="utf-8")
    assert worker_options(text) == [[], ["--threads", "0"]]
    outcome = Outcome()
    compare(program, before, after, outcome, methods=("fork",))
    assert outcome.ran == ["runs/super_resolution/main.py [fork]"]
    assert any(
        line.startswith("runs/super_resolution/main.py [fork --threads 0]: ran before the fix, fails after it")
        and "persistent_workers option needs num_workers > 0" in line
        for line in outcome.broken
    ), outcome.broken


def test_a_notebook_class_fails_in_spawned_workers(tmp_path):
    # What LL201's withheld fix would have done to minGPT's demo: workers
    # under spawn cannot import the notebook's class.
    program = Program("runs/mingpt_demo/demo.ipynb", RUNS / "mingpt_demo", "demo.ipynb")
    before = copy(program, tmp_path / "before")
    after = copy(program, tmp_path / "after")
    demo = after / "demo.ipynb"
    demo.write_text(demo.read_text(encoding="utf-8").replace("num_workers=0", "num_workers=1"), encoding="utf-8")
    assert run(before, "demo.ipynb", "spawn", [], TIMEOUT)[0]
    ok, why = run(after, "demo.ipynb", "spawn", [], 2 * TIMEOUT)
    assert not ok and "Can't get attribute 'SortDataset' on <module '__main__'" in why, why
    # And loadlint leaves the notebook as it is.
    assert fix(before).returncode == 1
    assert not changed(copy(program, tmp_path / "original"), before)
