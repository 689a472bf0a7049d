"""LL012 follows a notebook's Dataset through the notebook's helpers."""

from __future__ import annotations

from pathlib import Path

from loadlint.hardware.detect import parse_target, resolve_profile
from loadlint.engine.notebook import check
from loadlint.types import Options

FIXTURE = Path(__file__).parent / "fixtures" / "notebooks" / "helpers.ipynb"
PROFILE = resolve_profile(parse_target("cpus=8,gpus=1,platform=linux,python=3.12"))


def findings(select: set[str]):
    options = Options(select=frozenset(select), profile_factory=lambda: PROFILE)
    return check(FIXTURE, FIXTURE.read_bytes(), options).findings


def test_dataset_built_or_received_by_a_helper_is_reported():
    got = [(f.code, f.cell, f.location.row, f.location.column) for f in findings({"LL012", "LL007"})]
    # The loader inside make_loader (its caller passes FaceDataset), and the
    # one over make_dataset's result; imported and untraceable ones are silent.
    assert got == [("LL012", 4, 6, 12), ("LL012", 5, 2, 16)]


def test_the_message_names_the_notebook_class():
    for finding in findings({"LL012"}):
        assert finding.message.startswith("`FaceDataset` (inside the dataset) is defined in the notebook")
        assert "`AttributeError: Can't get attribute 'FaceDataset' on <module '__main__'>`" in finding.message


def test_adding_workers_over_a_helper_built_dataset_is_withheld():
    # LL201's fix would start workers over the notebook's class: withheld.
    text = FIXTURE.read_text(encoding="utf-8").replace("num_workers=2, ", "")
    path = FIXTURE.with_name("helpers_no_workers.ipynb")
    options = Options(select=frozenset({"LL201"}), profile_factory=lambda: PROFILE)
    result = check(path, text.encode("utf-8"), options)
    by_cell = {(f.cell, f.location.row): f for f in result.findings}
    for key in ((4, 6), (5, 2)):
        finding = by_cell[key]
        assert finding.fix is None and finding.fix_withheld is not None
        assert finding.fix_withheld.startswith(
            "no fix: `FaceDataset` defined in the notebook cannot be imported by workers started with spawn or forkserver"
        )
