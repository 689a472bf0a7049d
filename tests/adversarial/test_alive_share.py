"""The worker fix's share of the CPUs under hostile shapes: more loaders
alive together than CPUs, a loader zipped with itself."""

from __future__ import annotations

import textwrap

from loadlint.api import check_source
from loadlint.engine.decision import fix_text
from loadlint.hardware.detect import parse_target, resolve_profile
from loadlint.types import Options
from loadlint.workspace.config import Settings

SOURCE = """
from torch.utils.data import DataLoader
def main():
    a = DataLoader(x, batch_size=64)
    b = DataLoader(y, batch_size=64)
    c = DataLoader(z, batch_size=64)
    for epoch in range(3):
        for batch in {iterable}:
            pass
"""


def fix(source: str, target: str) -> tuple[str, list[str]]:
    profile = resolve_profile(parse_target(target))
    options = Options(select=frozenset({"LL201", "LL203"}), profile_factory=lambda: profile)
    fixed, remaining, _ = fix_text(textwrap.dedent(source), "train.py", options, unsafe=False)
    return fixed, [f"{f.location.row} {f.code} {'fix' if f.fix else 'no fix'}" for f in remaining]


def test_more_loaders_than_cpus_each_keep_one_worker_never_none() -> None:
    fixed, remaining = fix(SOURCE.format(iterable="zip(a, b, c)"), "cpus=2,gpus=1,platform=linux,python=3.12")
    assert fixed.count("num_workers=1)") == 2
    assert "num_workers=0" not in fixed
    # Three workers on two CPUs would be LL203's: the last fix is withheld, the finding says so.
    assert remaining == ["6 LL201 no fix"]
    profile = resolve_profile(parse_target("cpus=2,gpus=1,platform=linux,python=3.12"))
    (left,) = check_source(fixed, "train.py", settings=Settings(select=("LL201",)), profile=profile)
    assert "would introduce LL203" in (left.fix_withheld or "")


def test_without_a_target_more_loaders_than_cpus_still_get_a_worker() -> None:
    fixed, remaining = fix(SOURCE.format(iterable="zip(a, b, c)"), "platform=linux,python=3.12")
    assert fixed.count("num_workers=max(1, LOADER_WORKERS // 3))") == 3
    assert remaining == []


def test_a_loader_zipped_with_itself_is_alone() -> None:
    fixed, _ = fix(SOURCE.format(iterable="zip(a, a)"), "cpus=8,gpus=1,platform=linux,python=3.12")
    assert "DataLoader(x, batch_size=64, num_workers=7)" in fixed
