"""The library API and the command line report the same findings for the
golden fixtures (tests/fixtures/checker), under test_golden.py's profile."""

import json
from pathlib import Path

from click.testing import CliRunner

from loadlint.api import check_paths
from loadlint.frontends.cli import cli
from loadlint.workspace.config import Overrides
from loadlint.hardware.detect import parse_target

FIXTURES = Path(__file__).parent / "fixtures" / "checker"
TARGET = "cpus=8,gpus=4,memory=64,shm=16,platform=linux,python=3.12"


def test_api_and_cli_agree_on_the_golden_fixtures(monkeypatch):
    # From the fixtures' folder: seen from the repository's root they are
    # under tests/, where performance codes are not reported.
    monkeypatch.chdir(FIXTURES)
    paths = sorted(FIXTURES.glob("*.py"))
    overrides = Overrides(select=("ALL",), target=parse_target(TARGET))
    run = check_paths(paths, overrides, isolated=True)
    from_api = sorted(
        (Path(f.path).name, f.location.row, f.location.column, f.code, f.message) for f in run.findings
    )

    args = ["check", "--isolated", "--no-cache", "--select", "ALL", "--target", TARGET, "--output-format", "json"]
    result = CliRunner().invoke(cli, [*args, *map(str, paths)])
    assert result.exit_code == 1, result.output
    from_cli = sorted(
        (Path(f["filename"]).name, f["location"]["row"], f["location"]["column"], f["code"], f["message"])
        for f in json.loads(result.stdout)
    )

    assert from_api, "the golden fixtures have findings"
    assert from_api == from_cli
    # Every fixture is covered: one whose golden file lists findings has them.
    with_findings = {p.name for p in paths if p.with_suffix(".txt").read_text(encoding="utf-8").strip()}
    assert {name for name, *_ in from_api} == with_findings
