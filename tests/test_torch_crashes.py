"""The crash rules checked against torch itself.

For every crash rule (the rules whose category is ``crash``), each example that builds a module-level
``loader`` is run with real torch: the INVALID ones must raise (at
construction or at the first batch) with the error the rule's page quotes,
and the VALID ones and the fixed INVALID ones must construct and yield a
batch, unless another crash rule reports them (a VALID example of one rule
may be left to another), in which case torch must raise that rule's error.
The conditions come from reading torch's source; this is where they meet
it.

All cases run in two subprocesses (one whose workers fork, one whose workers
spawn) so that torch is imported twice, not once per case.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is not installed: the crash rules cannot be checked against it")

from loadlint.engine.analysis import analyse  # noqa: E402
from loadlint.engine.decision import fix_text  # noqa: E402

from loadlint.types import Options
from loadlint.rules import all_rules  # noqa: E402
from loadlint.rules.shared import spawn_reason, torch_before_2  # noqa: E402
from loadlint.rules.base import Invalid, dedent  # noqa: E402
from loadlint.rules.examples import examples_of  # noqa: E402
from loadlint.testing import EXAMPLE_PROFILE  # noqa: E402

pytestmark = pytest.mark.torch

#: Crash rules whose crash needs the program's own ``__main__`` (a notebook
#: kernel's, a script run directly), which importing a case module cannot
#: give: tests/test_notebook_rules_torch.py reproduces them.
AS_MAIN = {"notebook-worker-code": "a notebook kernel", "missing-main-guard": "a script run directly"}
#: Crash rules whose examples need a store that does not exist here (an
#: lmdb or h5py file): tests/test_dataset_handle.py reproduces the crash
#: with real handles under spawn and forkserver.
REAL_STORE = {"unpicklable-dataset-handle": "tests/test_dataset_handle.py"}
CRASH_RULES = [
    rule for rule in all_rules() if rule.category == "crash" and rule.name not in AS_MAIN and rule.name not in REAL_STORE
]

#: Names the examples use without defining them.
PRELUDE = """\
import torch as _torch
from torch.utils.data import TensorDataset as _TensorDataset
ds = dataset = train_set = _TensorDataset(_torch.arange(16, dtype=_torch.float32))
values = list(range(16))
"""

RUNNER = r'''
import importlib, json, multiprocessing, sys, traceback, warnings
sys.path.insert(0, sys.argv[1])

def run(case):
    multiprocessing.set_start_method(case["method"], force=True)
    stage = "construct"
    try:
        module = importlib.import_module(case["module"])
        stage = "iterate"
        next(iter(module.loader))
        return {"ok": True}
    except BaseException as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return {"ok": False, "stage": stage, "type": type(exc).__name__, "message": message}

if __name__ == "__main__":
    warnings.simplefilter("ignore")
    cases = json.loads(sys.stdin.read())
    print("RESULTS " + json.dumps({c["id"]: run(c) for c in cases}))
'''


def _runnable(code: str, profile) -> bool:
    if not re.search(r"^loader\s*=", code, re.M):
        return False  # built inside a function, or not bound: a lint-only example
    if "set_start_method" in code:
        return False  # would change the start method of the shared runner process
    if profile is not None and (profile.platform != "linux" and spawn_reason(profile) is None):
        return False
    if profile is not None and (torch_before_2(profile) or profile.platform == "windows"):
        return False  # this machine runs torch 2 on Linux: a 1.x or Windows crash cannot be reproduced
    return True


def _method(profile) -> str:
    return "spawn" if spawn_reason(profile or EXAMPLE_PROFILE) is not None else "fork"


def _crash_rules_report(code: str, profile) -> str | None:
    """The crash rule that reports on ``code``, if any: a VALID example of one
    rule may be another rule's crash, and then torch must raise too."""
    options = Options(frozenset(r.code for r in CRASH_RULES), lambda: profile or EXAMPLE_PROFILE)
    findings, _ = analyse(code, "example.py", options)
    return findings[0].code if findings else None


def _collect():
    cases = []
    for rule in CRASH_RULES:
        for kind, examples in zip(("VALID", "INVALID"), examples_of(rule)):
            for i, example in enumerate(examples):
                code = dedent(example.code)
                if not _runnable(code, example.profile):
                    continue
                method = _method(example.profile)
                reporter = rule if kind == "INVALID" else rule_by_code(_crash_rules_report(code, example.profile))
                cases.append((reporter or rule, f"{rule.code}_{kind}_{i}", code, reporter is not None, method))
                if isinstance(example, Invalid) and example.fixed is not None:
                    options = Options(frozenset({rule.code}), lambda p=example.profile: p or EXAMPLE_PROFILE)
                    fixed, _, _ = fix_text(code, "example.py", options, unsafe=True)
                    reporter = rule_by_code(_crash_rules_report(fixed, example.profile))
                    cases.append((reporter or rule, f"{rule.code}_FIXED_{i}", fixed, reporter is not None, method))
    return cases


def rule_by_code(code: str | None):
    return next((r for r in CRASH_RULES if r.code == code), None)


CASES = _collect()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("torch_cases")
    (folder / "runner.py").write_text(RUNNER)
    out = {}
    for method in ("fork", "spawn"):
        batch = []
        for _, case_id, code, _, case_method in CASES:
            if case_method != method:
                continue
            module = f"case_{case_id.lower()}"
            (folder / f"{module}.py").write_text(PRELUDE + code)
            batch.append({"id": case_id, "module": module, "method": method})
        if not batch:
            continue
        proc = subprocess.run(
            [sys.executable, str(folder / "runner.py"), str(folder)],
            input=json.dumps(batch), capture_output=True, text=True, timeout=300, cwd=folder,
        )
        line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULTS ")), None)
        assert line is not None, f"the {method} runner failed:\n{proc.stdout}\n{proc.stderr}"
        out.update(json.loads(line[len("RESULTS "):]))
    return out


def test_every_crash_rule_is_checked_against_torch():
    covered = {}
    for _, case_id, _, _, _ in CASES:
        code, kind, _ = case_id.split("_")
        covered.setdefault(code, set()).add(kind)
    for rule in CRASH_RULES:
        missing = {"VALID", "INVALID"} - covered.get(rule.code, set())
        assert not missing, f"{rule.code} has no runnable {missing} example"
        if rule.fix_availability != "none":
            assert "FIXED" in covered[rule.code], f"{rule.code} has no runnable fixed example"


def test_the_crash_rules_left_to_the_notebook_test_are_checked_there():
    assert {rule.name for rule in all_rules() if rule.category == "crash"} > set(AS_MAIN)
    there = (Path(__file__).parent / "test_notebook_rules_torch.py").read_text(encoding="utf-8")
    for rule in all_rules():
        if rule.name in AS_MAIN:
            assert f'== ["{rule.code}"]' in there, f"{rule.code} is reproduced in neither test"


def _quoted(message: str, doc: str) -> bool:
    """The rule's page quotes torch's error (variable parts aside)."""
    message = re.sub(r"\s+", " ", message)
    rest = message.split(" ", 1)[1] if " " in message else message
    return message[:40] in doc or rest[:30] in doc


@pytest.mark.parametrize("case", CASES, ids=[c[1] for c in CASES])
def test_example_against_torch(case, results):
    rule, case_id, code, invalid, method = case
    result = results[case_id]
    if not invalid:
        if not result["ok"] and result["type"] in ("NameError", "ModuleNotFoundError"):
            pytest.skip(f"lint-only example: {result['message']}")
        assert result["ok"], f"{case_id} ({method}) should construct and yield a batch:\n{code}\n{result}"
        return
    assert not result["ok"], f"{case_id} ({method}) should raise with torch:\n{code}"
    assert result["type"] not in ("NameError", "ImportError", "ModuleNotFoundError"), result
    doc = rule.documentation()
    assert result["type"] in doc and _quoted(result["message"], doc), (
        f"{rule.code}'s page does not quote the error torch raised: {result['type']}: {result['message']}"
    )
