"""Worker totals of loaders alive at the same time (LL203): the shapes that
are certain add up, every other shape stays silent.  The golden project
``tests/fixtures/projects/alive_loaders`` holds the multi-module shapes."""

from __future__ import annotations

import textwrap

import pytest

from loadlint.api import check_source
from loadlint.types import Options
from loadlint.engine.decision import fix_text
from loadlint.hardware.detect import parse_target, resolve_profile
from loadlint.workspace.config import Settings

PROFILE = resolve_profile(parse_target("cpus=8,gpus=1,memory=64,shm=16,platform=linux,python=3.12"))

PERSISTENT = """
from torch.utils.data import DataLoader
def main():
    train = DataLoader(a, batch_size=8, num_workers=5, persistent_workers=True)
    val = DataLoader(b, batch_size=8, num_workers=5, persistent_workers=True)
    {between}
    for epoch in range(3):
        for batch in train:
            pass
        for batch in val:
            pass
"""


def totals(source: str) -> list[str]:
    findings = check_source(textwrap.dedent(source), "train.py", settings=Settings(select=("LL203",)), profile=PROFILE)
    return [f"{f.location.row} {f.message.split(':')[0]}" for f in findings]


def test_persistent_loaders_iterated_in_one_function_add_up() -> None:
    assert totals(PERSISTENT.format(between="pass")) == [
        "5 `train` and `val` are alive at the same time (persistent workers, kept while each loader lives)"
    ]


@pytest.mark.parametrize(
    "between",
    ["train = DataLoader(c, num_workers=5, persistent_workers=True)", "del train"],
    ids=["rebound", "deleted"],
)
def test_a_loader_that_may_be_gone_is_not_added(between: str) -> None:
    assert totals(PERSISTENT.format(between=between)) == []


def test_fewer_workers_than_cpus_together_is_silent() -> None:
    assert totals(PERSISTENT.format(between="pass").replace("num_workers=5", "num_workers=4")) == []


def test_one_loader_over_the_cpus_is_reported_alone_not_in_a_total() -> None:
    found = totals(PERSISTENT.format(between="pass").replace("num_workers=5, persistent", "num_workers=9, persistent", 1))
    assert found == ["4 `num_workers=9` on 8 usable CPUs"]


@pytest.mark.parametrize(
    "loop",
    [
        "for x, y in zip(a_loader, b_loader):",
        "for i, (x, y) in enumerate(zip(a_loader, b_loader)):",
        "for x, y in zip(a_loader, b_loader, strict=True):",
    ],
)
def test_loaders_zipped_together_add_up(loop: str) -> None:
    source = f"""
    from torch.utils.data import DataLoader
    a_loader = DataLoader(a, batch_size=8, num_workers=5)
    b_loader = DataLoader(b, batch_size=8, num_workers=5)
    {loop}
        pass
    """
    assert totals(source) == ["4 `a_loader` and `b_loader` are alive at the same time (iterated together by `zip`)"]


@pytest.mark.parametrize(
    "loop",
    [
        "for x in chain(a_loader, b_loader):",  # one after the other
        "for x, y in zip(a_loader, cycle(b_loader)):",  # not a plain loader variable
        "for x, y in zip(a_loader, labels):",  # one loader only
    ],
)
def test_other_iteration_shapes_are_silent(loop: str) -> None:
    source = f"""
    from itertools import chain, cycle
    from torch.utils.data import DataLoader
    a_loader = DataLoader(a, batch_size=8, num_workers=5)
    b_loader = DataLoader(b, batch_size=8, num_workers=5)
    {loop}
        pass
    """
    assert totals(source) == []


def test_a_fix_that_would_make_loaders_add_up_is_withheld_and_nothing_is_left_behind() -> None:
    source = textwrap.dedent(PERSISTENT.format(between="pass").replace(", persistent_workers=True", ", pin_memory=True"))
    settings = Settings(select=("LL204", "LL203"))
    checked = check_source(source, "train.py", settings=settings, profile=PROFILE)
    assert [f.fix is not None for f in checked] == [True, False]
    assert "would introduce LL203" in (checked[1].fix_withheld or "")
    options = Options(select=frozenset({"LL204", "LL203"}), profile_factory=lambda: PROFILE)
    fixed, remaining, _ = fix_text(source, "train.py", options, unsafe=True)
    assert fixed.count("persistent_workers=True") == 1
    # Kept alive beside the first loader's, the second's workers would crowd
    # the CPUs: LL204 leaves that loader to the author, so the fix leaves no finding behind.
    assert remaining == []
    assert check_source(fixed, "train.py", settings=settings, profile=PROFILE) == []


ZIPPED = """
from torch.utils.data import DataLoader
def main():
    a_loader = DataLoader(a, batch_size=64{a})
    b_loader = DataLoader(b, batch_size=64{b})
    for epoch in range(3):
        for x, y in zip(a_loader, b_loader):
            pass
"""


def fixed_with(source: str, codes: frozenset[str], profile_factory=lambda: PROFILE) -> tuple[str, list[str]]:
    options = Options(select=codes, profile_factory=profile_factory)
    fixed, remaining, _ = fix_text(textwrap.dedent(source), "train.py", options, unsafe=False)
    return fixed, [f"{f.location.row} {f.code}" for f in remaining]


def test_loaders_alive_together_get_a_part_of_the_cpus_each_and_reach_the_fixed_point() -> None:
    # Before, each got 7 of the 8 CPUs: the second fix was withheld (7 + 7 = 14 workers, LL203) and LL201 stayed.
    codes = frozenset({"LL201", "LL203", "LL204"})
    fixed, remaining = fixed_with(ZIPPED.format(a="", b=""), codes)
    assert "DataLoader(a, batch_size=64, num_workers=3, persistent_workers=True)" in fixed
    assert "DataLoader(b, batch_size=64, num_workers=3, persistent_workers=True)" in fixed
    assert remaining == []
    assert check_source(fixed, "train.py", settings=Settings(select=tuple(codes)), profile=PROFILE) == []


def test_the_message_names_the_loaders_sharing_the_cpus() -> None:
    findings = check_source(textwrap.dedent(ZIPPED.format(a="", b="")), "train.py",
                            settings=Settings(select=("LL201",)), profile=PROFILE)
    assert [f.message.partition("use ")[2] for f in findings] == [
        "`num_workers=3` (target: 8 CPUs, 1 GPU); a part of the CPUs for each of `a_loader` and `b_loader`, "
        "alive at the same time (iterated together by `zip`)"
    ] * 2


def test_loaders_over_the_cpus_together_are_lowered_to_their_part() -> None:
    fixed, remaining = fixed_with(ZIPPED.format(a=", num_workers=16", b=", num_workers=16"), frozenset({"LL203"}))
    assert fixed.count("num_workers=3)") == 2
    assert remaining == []


def test_without_a_target_the_written_code_shares_the_run_time_count() -> None:
    profile = resolve_profile(parse_target("gpus=1,platform=linux,python=3.12"))
    fixed, remaining = fixed_with(ZIPPED.format(a="", b=""), frozenset({"LL201"}), lambda: profile)
    assert fixed.count("num_workers=max(1, LOADER_WORKERS // 2))") == 2
    assert "LOADER_WORKERS = max(1, LOADER_CPUS - (1 if LOADER_CPUS > 2 else 0))" in fixed
    assert remaining == []


def test_a_loader_alone_keeps_the_whole_count() -> None:
    source = ZIPPED.format(a="", b="").replace("zip(a_loader, b_loader)", "a_loader").replace("x, y", "x")
    fixed, _ = fixed_with(source, frozenset({"LL201"}))
    assert "DataLoader(a, batch_size=64, num_workers=7)" in fixed
    assert "DataLoader(b, batch_size=64, num_workers=7)" in fixed
