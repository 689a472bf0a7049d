"""Measured beats guessed: ``fix --from-verify`` leaves a mark next to the
call it rewrote, and LL201, LL203 and LL204 defer to it on the measured
hardware (and say so on other hardware)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from loadlint.frontends.cli import cli
from loadlint.engine.pipeline import lint_bytes
from loadlint.types import Options
from loadlint.rules.base import Measured
from loadlint.types import HardwareProfile

TARGET = ["--target", "cpus=2,gpus=0,platform=linux,python=3.11", "--isolated", "--no-cache"]
SELECT = frozenset({"LL201", "LL203", "LL204"})


def profile(cpus: int, gpus: int = 0) -> HardwareProfile:
    return HardwareProfile(usable_cpus=cpus, gpu_count=gpus, platform="linux", python="3.11",
                           declared=frozenset({"cpus", "gpus", "platform", "python"}))


def findings(text: str, cpus: int) -> list[tuple[str, str]]:
    result = lint_bytes(text.encode(), "train.py", Options(SELECT, lambda: profile(cpus)))
    return [(f.code, f.message) for f in result.findings]


def run(args: list[str]):
    return CliRunner().invoke(cli, [*args, *TARGET, "--select", "LL201,LL203,LL204"],
                              catch_exceptions=False)


WRITTEN = """\
from torch.utils.data import DataLoader

loader = DataLoader(dataset, batch_size=16)
for epoch in range(3):
    for batch in loader:
        step(batch)
"""

REPORT = {
    "schema": "loadlint.verify/1", "date": "2026-12-04",
    "machine": {"usable_cpus": 2, "gpu_count": 0},
    "call_sites": [{"file": "train.py", "line": 3, "end_line": 3, "verdict": "confirmed",
                    "speedup": 8.6512, "best": {"num_workers": 8, "persistent_workers": True},
                    "removed": []}],
}

MARKED = """\
from torch.utils.data import DataLoader

loader = DataLoader(dataset, batch_size=16, num_workers=8, persistent_workers=True)  # loadlint: measured 8.65x on 2 CPUs, 2026-12-04
for epoch in range(3):
    for batch in loader:
        step(batch)
"""


def test_the_mark_parses_and_matches_the_measured_machine() -> None:
    mark = Measured.parse("x = f()  # loadlint: measured 8.65x on 2 CPUs, 1 GPU, 2026-12-04")
    assert mark is not None and (mark.speedup, mark.cpus, mark.gpus, mark.date) == (8.65, 2, 1, "2026-12-04")
    assert mark.matches(profile(2, 1)) and not mark.matches(profile(2, 8)) and not mark.matches(profile(64, 1))
    assert Measured.parse("x = f()  # loadlint: measured on 2 CPUs") is None


def test_fix_from_verify_writes_the_mark_and_check_then_agrees(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "train.py"
    path.write_text(WRITTEN)
    (tmp_path / "report.json").write_text(json.dumps(REPORT))
    monkeypatch.chdir(tmp_path)
    # Before: the static guess and the measurement disagree (LL203 would call 8 oversubscribed).
    assert [c for c, _ in findings(WRITTEN.replace("batch_size=16", "batch_size=16, num_workers=8"), 2)] \
        == ["LL203", "LL204"]
    result = run(["fix", "--from-verify", "report.json"])
    assert result.exit_code == 0, result.output
    assert path.read_text() == MARKED
    check = run(["check", "train.py"])
    assert check.exit_code == 0, check.output
    assert "All checks passed!" in check.output
    # Applied again: nothing changes, the mark is not repeated.
    again = run(["fix", "--from-verify", "report.json", "--diff"])
    assert again.exit_code == 0 and again.stdout == ""


def test_a_new_measurement_replaces_the_old_mark(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "train.py"
    path.write_text(MARKED.replace("num_workers=8", "num_workers=4"))
    (tmp_path / "report.json").write_text(json.dumps(REPORT))
    monkeypatch.chdir(tmp_path)
    assert run(["fix", "--from-verify", "report.json"]).exit_code == 0
    assert path.read_text() == MARKED


def test_ll203_defers_on_the_measured_machine_and_says_so_elsewhere() -> None:
    assert findings(MARKED, 2) == []
    [(code, message)] = [f for f in findings(MARKED, 4) if f[0] == "LL203"]
    assert message.endswith("; the call's configuration was measured (8.65x on 2 CPUs, 2026-12-04) on other "
                            "hardware than the target: re-measure with `loadlint verify` there")


def test_ll201_defers_to_a_measured_num_workers_0() -> None:
    text = WRITTEN.replace("batch_size=16)", "batch_size=16)  # loadlint: measured 1.12x on 2 CPUs, 2026-12-04")
    assert findings(text, 2) == []
    [(code, message)] = findings(text, 8)
    assert code == "LL201" and "measured (1.12x on 2 CPUs, 2026-12-04) on other hardware" in message
    assert [c for c, _ in findings(WRITTEN, 2)] == ["LL201"]


def test_ll204_defers_to_a_measured_configuration_on_any_target() -> None:
    text = WRITTEN.replace("batch_size=16)", "batch_size=16, num_workers=2)")
    assert [c for c, _ in findings(text, 2)] == ["LL204"]
    marked = text.replace("num_workers=2)", "num_workers=2)  # loadlint: measured 1.90x on 2 CPUs, 2026-12-04")
    assert findings(marked, 2) == [] and findings(marked, 16) == []


def test_the_mark_counts_on_any_line_of_a_multiline_call() -> None:
    text = """\
from torch.utils.data import DataLoader

loader = DataLoader(
    dataset,
    num_workers=8,
)  # loadlint: measured 8.65x on 2 CPUs, 2026-12-04
"""
    assert findings(text, 2) == []
    assert [c for c, _ in findings(text.replace("  # loadlint: measured 8.65x on 2 CPUs, 2026-12-04", ""), 2)] \
        == ["LL203"]


def test_fix_from_verify_with_nothing_confirmed_is_not_a_clean_run(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "train.py").write_text(WRITTEN)
    site = dict(REPORT["call_sites"][0], verdict="contended")
    (tmp_path / "report.json").write_text(json.dumps(dict(REPORT, call_sites=[site])))
    monkeypatch.chdir(tmp_path)
    result = run(["fix", "--from-verify", "report.json"])
    assert result.exit_code == 1
    assert result.stderr == ("loadlint: train.py:3: verdict 'contended', nothing to apply\n"
                             "loadlint: report.json has no confirmed configuration: nothing was written\n")
    assert "All checks passed!" not in result.output
