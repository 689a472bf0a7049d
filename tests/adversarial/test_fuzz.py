"""Generated programs (hypothesmith, from the grammar and from libcst nodes)
with DataLoader calls spliced in.

* check never raises and never reports an internal error;
* fix output parses, re-checks without a fixable finding of the codes it
  fixed, and a second fix changes nothing.

The CI run tries a few hundred programs; the long run (``-m fuzz_long``)
thousands::

    python -m pytest -m fuzz_long tests/adversarial -s

``LOADLINT_FUZZ_GRAMMAR`` and ``LOADLINT_FUZZ_NODE`` set the long run's
example counts.  Every run prints what it tried.
"""

from __future__ import annotations

import ast
import os
from collections import Counter

import hypothesmith
import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadlint.engine.analysis import analyse
from loadlint.engine.decision import FixFailed, fix_text
from loadlint.engine.pipeline import lint_bytes

#: Loader constructions the rules have something to say about (and fix).
SNIPPETS = [
    "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=8)\n",
    "import torch\nloader = torch.utils.data.DataLoader(ds, shuffle=True, num_workers=0)\nfor b in loader:\n    b.cuda()\n",
    "import torch.utils.data as tud\nNUM = 0\nl2 = tud.DataLoader(ds, 16, True, None, None, NUM)\n",
    "from torch.utils.data import DataLoader as DL\nimport torch.distributed as dist\ndist.init_process_group('nccl')\n"
    "l3 = DL(ds, batch_size=4, collate_fn=lambda b: b)\n",
    "from torch.utils import data\nl4 = data.DataLoader(\n    ds,\n    batch_size=2,  # small\n)\n",
]

COUNTS: Counter = Counter()


def top_level_lines(program: str) -> list[int]:
    """Line indexes where a top-level statement may be inserted: where the
    line starts at column 0 and the previous line does not continue."""
    lines = program.splitlines(keepends=True)
    spots = [len(lines)]
    try:
        module = cst.parse_module(program)
    except Exception:
        return spots
    wrapper = cst.metadata.MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(cst.metadata.PositionProvider)
    for statement in module.body:
        spots.append(positions[statement].start.line - 1)
    return sorted(set(spots))


@st.composite
def spliced(draw, programs):
    program = draw(programs)
    if program and not program.endswith(("\n", "\r")):
        program += "\n"
    lines = program.splitlines(keepends=True)
    snippet = draw(st.sampled_from(SNIPPETS))
    where = draw(st.sampled_from(top_level_lines(program)))
    if draw(st.booleans()):
        # Also inside a function, where the rules read scopes differently.
        snippet = "def _loader_fn(ds):\n" + "".join("    " + line for line in snippet.splitlines(keepends=True))
    return "".join(lines[:where]) + snippet + "".join(lines[where:])


def compiles(text: str) -> bool:
    try:
        compile(text, "fuzz.py", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


def check_properties(text: str, options) -> None:
    COUNTS["programs"] += 1
    result = lint_bytes(text.encode("utf-8", "surrogatepass"), "fuzz.py", options)
    assert result.error is None, result.error
    findings, _ = analyse(text, "fuzz.py", options)
    COUNTS["findings"] += len(findings)
    if any(f.code == "LL900" for f in findings):
        COUNTS["LL900"] += 1
    # Both the default (safe fixes) and --unsafe-fixes, program by program.
    unsafe = len(text) % 2 == 0
    try:
        fixed, remaining, applied = fix_text(text, "fuzz.py", options, unsafe=unsafe)
    except FixFailed:
        COUNTS["fix refused"] += 1
        return
    if fixed == text:
        return
    COUNTS["fixed"] += 1
    cst.parse_module(fixed)
    if compiles(text):
        assert compiles(fixed), fixed
    fixed_codes = set(applied)
    again, _ = analyse(fixed, "fuzz.py", options)
    assert not [f for f in again if f.code in fixed_codes and f.fix is not None], applied
    second, _, second_applied = fix_text(fixed, "fuzz.py", options, unsafe=unsafe)
    assert second == fixed and not second_applied


def fuzz_settings(examples: int):
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
    )


CI_GRAMMAR = 100
CI_NODE = 40


@pytest.mark.slow
def test_grammar_programs(options):
    COUNTS.clear()

    @fuzz_settings(CI_GRAMMAR)
    @given(spliced(hypothesmith.from_grammar()))
    def run(text):
        check_properties(text, options)

    run()
    print(f"fuzz (grammar): {dict(COUNTS)}")


@pytest.mark.slow
def test_node_programs(options):
    COUNTS.clear()

    @fuzz_settings(CI_NODE)
    @given(spliced(hypothesmith.from_node()))
    def run(text):
        check_properties(text, options)

    run()
    print(f"fuzz (node): {dict(COUNTS)}")


@given(st.text(max_size=300))
@fuzz_settings(150)
def test_arbitrary_text_with_a_loader(text):
    from loadlint.types import Options
    from loadlint.rules import CODES
    from loadlint.types import HardwareProfile

    profile = HardwareProfile(usable_cpus=4, gpu_count=1, declared=frozenset({"cpus", "gpus"}))
    options = Options(select=frozenset(CODES), profile_factory=lambda: profile)
    for candidate in (text + "\nDataLoader(x)\n", "from torch.utils.data import DataLoader\n" + text):
        result = lint_bytes(candidate.encode("utf-8", "surrogatepass"), "t.py", options)
        assert result.error is None, result.error


@pytest.mark.fuzz_long
def test_grammar_programs_long(options):
    COUNTS.clear()

    @fuzz_settings(int(os.environ.get("LOADLINT_FUZZ_GRAMMAR", "3000")))
    @given(spliced(hypothesmith.from_grammar()))
    def run(text):
        check_properties(text, options)

    run()
    print(f"fuzz long (grammar): {dict(COUNTS)}")


@pytest.mark.fuzz_long
def test_node_programs_long(options):
    COUNTS.clear()

    @fuzz_settings(int(os.environ.get("LOADLINT_FUZZ_NODE", "1000")))
    @given(spliced(hypothesmith.from_node()))
    def run(text):
        check_properties(text, options)

    run()
    print(f"fuzz long (node): {dict(COUNTS)}")
