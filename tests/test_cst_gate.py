"""loadlint/cst: the speed-ups behind one gate, in place only while loadlint
parses, and plain libcst giving the same output."""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import libcst as cst
import pytest

from loadlint import api
from loadlint.cst import gate, slicing
from loadlint.rules import all_rules
from loadlint.rules.examples import examples_of
from tests.texts import REPO

TARGET = "cpus=8,gpus=4,memory=64,shm=16,platform=linux,python=3.12"


def test_the_tested_range_follows_the_dependency() -> None:
    assert [gate.tested(v) for v in ("1.4.0", "1.4", "1.9.0", "1.9.7", "1.3.1", "1.10.0", "2.0.0", "1.10.0rc1", "x")] == [
        True, True, True, True, False, False, False, False, False]
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    low, high = gate.LOWEST, (gate.NEWEST[0], gate.NEWEST[1] + 1)
    assert f'"libcst>={low[0]}.{low[1]},<{high[0]}.{high[1]}"' in pyproject
    # The lowest is also what CI's second job installs.
    assert f"libcst=={low[0]}.{low[1]}.0" in (REPO / ".ci" / "run").read_text(encoding="utf-8")


def test_the_variable_is_read_at_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    assert gate.tested(gate.libcst_version())  # the tests run a tested libcst
    monkeypatch.delenv(gate.PLAIN_ENV, raising=False)
    assert gate.fast()
    monkeypatch.setenv(gate.PLAIN_ENV, "1")
    assert not gate.fast()
    monkeypatch.setenv(gate.PLAIN_ENV, "0")
    assert gate.fast()


def _rule_examples(root: Path) -> list[Path]:
    """Every rule's VALID and INVALID example, each in a folder of its own."""
    folders = []
    for rule in all_rules():
        for kind, examples in zip(("valid", "invalid"), examples_of(rule)):
            for i, example in enumerate(examples):
                try:
                    data = example.code.encode("utf-8")
                except UnicodeEncodeError:
                    continue  # a lone surrogate: no file holds it
                folder = root / f"{rule.code}_{kind}_{i}"
                (folder / example.path).parent.mkdir(parents=True, exist_ok=True)
                (folder / example.path).write_bytes(data)
                folders.append(folder)
    return folders


def _both_ways(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[bytes], subprocess.CompletedProcess[bytes]]:
    env = {k: v for k, v in os.environ.items() if k != gate.PLAIN_ENV}
    runs = []
    for plain in ("", "1"):
        out = subprocess.run([sys.executable, "-m", "loadlint", *args], cwd=cwd, capture_output=True,
                             env={**env, gate.PLAIN_ENV: plain, "PYTHONPATH": str(REPO)})
        runs.append(out)
    return runs[0], runs[1]


def test_plain_libcst_gives_byte_identical_output(tmp_path: Path) -> None:
    examples = _rule_examples(tmp_path / "rules")
    paths = [str(REPO / "tests" / "fixtures"), str(REPO / "examples"), *map(str, examples)]
    common = ["--no-cache", "--select", "ALL", "--target", TARGET]
    fast, plain = _both_ways(["check", "--output-format", "json", *common, *paths], tmp_path)
    assert fast.stderr == plain.stderr == b""
    assert (fast.returncode, fast.stdout) == (plain.returncode, plain.stdout)
    assert fast.stdout.count(b'"code"') > 300  # every golden, example and rule example was checked
    # The fixes' code (rendered by the code generator) too.
    fast, plain = _both_ways(["check", "--diff", "--unsafe-fixes", *common, *paths], tmp_path)
    assert (fast.returncode, fast.stdout, fast.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert fast.stdout.count(b"+++ b/") > 15


def _pristine() -> list[str]:
    """The libcst node classes whose constructor or check is not libcst's."""
    changed = [n for n, c in vars(cst).items() if isinstance(c, type) and issubclass(c, cst.CSTNode)
               and "__init__" in vars(c) and vars(c)["__init__"].__code__.co_filename == "<loadlint node constructors>"]
    if vars(cst.CSTNode)["__post_init__"].__module__.startswith("loadlint"):
        changed.append("CSTNode.__post_init__")
    return changed


CALL = """
from torch.utils.data import DataLoader
loader = DataLoader(dataset, batch_size=32, num_workers=0)
for batch in loader:
    pass
"""


def test_a_library_call_leaves_libcst_as_it_was() -> None:
    slicing.prepare()  # the fast constructors exist, as in a long-lived process
    assert _pristine() == []
    assert {f.code for f in api.check_source(CALL * 50, "train.py", select=["LL201"])} == {"LL201"}
    assert _pristine() == []


def test_flake8_leaves_libcst_as_it_was() -> None:
    from loadlint.frontends.flake8 import Plugin

    slicing.prepare()
    found = list(Plugin(None, (CALL * 50).splitlines(keepends=True), "train.py").run())
    assert any("LL201" in message for _, _, message, _ in found)
    assert _pristine() == []


def _invalid_call() -> cst.Call:
    return cst.Call(func=cst.Name("f"), lpar=[cst.LeftParen()])  # unbalanced parentheses


def test_other_threads_nodes_are_checked_during_a_parse() -> None:
    slicing.prepare()
    outcomes: list[str] = []

    def build() -> None:
        try:
            _invalid_call()
            outcomes.append("unchecked")
        except cst.CSTValidationError:
            outcomes.append("checked")

    with slicing.parser_nodes(check_names=False):  # loadlint's parsing state, in this thread
        _invalid_call()  # this thread's nodes go unchecked
        other = threading.Thread(target=build)
        other.start()
        other.join()
    assert outcomes == ["checked"]


def test_other_threads_nodes_are_checked_during_real_parses() -> None:
    slicing.prepare()
    text = CALL * 400
    done = threading.Event()
    outcomes: list[str] = []

    def parse() -> None:
        for _ in range(3):
            slicing.parse_module(text)
        done.set()

    parser = threading.Thread(target=parse)
    parser.start()
    while not done.is_set():
        try:
            _invalid_call()
            outcomes.append("unchecked")
        except cst.CSTValidationError:
            outcomes.append("checked")
    parser.join()
    assert outcomes and set(outcomes) == {"checked"}


def test_a_pool_leaves_what_its_host_froze_frozen(tmp_path: Path) -> None:
    from loadlint.run.runner import lint_candidates
    from loadlint.workspace.config import Overrides, ConfigResolver
    from loadlint.workspace.discover import discover

    for i in range(4):
        (tmp_path / f"m{i}.py").write_text(CALL, encoding="utf-8")
    resolver = ConfigResolver(Overrides(), None, True)
    candidates = discover([tmp_path], resolver.for_path)
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        run = lint_candidates(candidates, jobs=2, pool_min_saving=0)
        assert len(run.findings) >= 4
        assert frozen > 0 and gc.get_freeze_count() > frozen // 2  # (frozen objects freed meanwhile leave it)
    finally:
        gc.unfreeze()


#: Private libcst names: its underscored modules and the internals the fast path uses.
PRIVATE = re.compile(r"libcst\._|\b_nodes\b|\b_codegen\b|\b_computed\b|\b_update_position\b")


def test_no_private_libcst_name_outside_the_cst_package() -> None:
    places = []
    for path in sorted((REPO / "loadlint").rglob("*.py")):
        if (REPO / "loadlint" / "cst") in path.parents:
            continue
        for row, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if PRIVATE.search(line):
                places.append(f"{path.relative_to(REPO)}:{row}: {line.strip()}")
    assert places == []



def test_a_run_served_from_the_cache_never_imports_libcst(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("from torch.utils.data import DataLoader\n\nloader = DataLoader(range(8))\n")
    code = (
        "import sys\n"
        "from loadlint.frontends.cli import main\n"
        "try:\n"
        "    main(['check', '--cache-dir', 'cache', '--exit-zero', '-q', '.'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "cst = sys.modules.get('libcst')\n"
        "print(None if cst is None else vars(cst.CSTNode)['__post_init__'].__module__)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(gate.PLAIN_ENV, None)
    runs = [subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env) for _ in range(2)]
    # The first run parsed (and left libcst's classes as they were); the second read the cache only.
    assert [(r.returncode, r.stderr, r.stdout.splitlines()[-1]) for r in runs] == [
        (0, "", "libcst._nodes.base"), (0, "", "None")]
