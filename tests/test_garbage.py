"""A checked (or fixed) file's tree is freed by reference counting as soon
as its results are dropped: no reference cycle holds it for the cyclic
collector, which would walk every node of every live tree again and again
(a twentieth of a run, measured on Lightning's 91 loader files)."""

from __future__ import annotations

import gc
from collections import Counter
from pathlib import Path
from typing import Callable

import libcst as cst
import pytest

from loadlint.hardware.detect import parse_target, resolve_profile
from loadlint.engine.pipeline import check_bytes
from loadlint.rules import CODES
from loadlint.types import FixRequest, Options

FIXTURES = Path(__file__).parent / "fixtures"
SOURCES = (
    sorted((FIXTURES / "fix").glob("*.in.py")) + sorted((FIXTURES / "checker").glob("*.py"))
    + sorted((FIXTURES / "notebooks").glob("*.ipynb"))
)
PROFILE = resolve_profile(parse_target("cpus=8,gpus=4,memory=64,shm=16,platform=linux,python=3.12"))


def trees_left_to_the_collector(run: Callable[[], None]) -> Counter[str]:
    """The libcst nodes that only the cyclic collector would free after ``run()``."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run()
        gc.collect()
        return Counter(type(o).__name__ for o in gc.garbage if isinstance(o, cst.CSTNode))
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


@pytest.mark.parametrize("fix", [None, FixRequest(unsafe=True, dry_run=True)], ids=["check", "fix"])
def test_no_cycle_holds_a_tree(fix: FixRequest | None) -> None:
    options = Options(frozenset(CODES), lambda: PROFILE)

    def run() -> None:
        for path in SOURCES:
            result = check_bytes(path.read_bytes(), path.name, options, fix)
            assert result.error is None

    assert len(SOURCES) > 20
    assert trees_left_to_the_collector(run) == Counter()
