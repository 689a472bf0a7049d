"""Whole-file golden tests: tests/fixtures/checker/X.py against X.txt.

Regenerate after an intended change with ``LOADLINT_REGEN=1 python -m pytest
tests/test_golden.py`` and review the diff.
"""

import os
from pathlib import Path

import pytest

from loadlint.api import check_source
from loadlint.workspace.config import Settings
from loadlint.hardware.detect import parse_target, resolve_profile

FIXTURES = Path(__file__).parent / "fixtures" / "checker"
PROFILE = resolve_profile(parse_target("cpus=8,gpus=4,memory=64,shm=16,platform=linux,python=3.12"))


def render(path: Path) -> str:
    findings = check_source(path.read_text(encoding="utf-8"), path.name, settings=Settings(select=("ALL",)), profile=PROFILE)
    return "".join(f"{f.location.row}:{f.location.column} {f.code} {f.message}\n" for f in findings)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.py")), ids=lambda p: p.stem)
def test_golden(path):
    expected_file = path.with_suffix(".txt")
    actual = render(path)
    if os.environ.get("LOADLINT_REGEN"):
        expected_file.write_text(actual, encoding="utf-8")
    assert expected_file.exists(), f"missing {expected_file.name}: run with LOADLINT_REGEN=1"
    assert actual == expected_file.read_text(encoding="utf-8")
