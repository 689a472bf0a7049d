"""The CI formats beyond SARIF: GitHub workflow commands (escaped as the
Actions toolkit does), GitLab Code Quality (schema fields, stable
fingerprints), JUnit XML and pylint lines."""

from __future__ import annotations

import json
import os
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from click.testing import CliRunner

from loadlint.frontends.cli import cli
from loadlint.output.formats import escape_data, escape_property

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "integrations" / "train_bad.py"
BASE = ["check", "--no-cache", "--target", "cpus=4,gpus=1"]
GITLAB_SEVERITIES = {"info", "minor", "major", "critical", "blocker"}


def run(args, cwd: Path, select: str = "LL101,LL201,LL202"):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, [*BASE, "--select", select, *args], env={"LOADLINT_OUTPUT_FORMAT": None}, catch_exceptions=False)
    finally:
        os.chdir(old)


# -- github ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "data", "prop"),
    [
        ("plain", "plain", "plain"),
        ("100%", "100%25", "100%25"),
        ("a\r\nb", "a%0D%0Ab", "a%0D%0Ab"),
        ("k: v, w", "k: v, w", "k%3A v%2C w"),
        ("%0A literal", "%250A literal", "%250A literal"),
    ],
)
def test_escaping_matches_the_actions_toolkit(text, data, prop):
    assert escape_data(text) == data
    assert escape_property(text) == prop


def test_github_escapes_awkward_paths(tmp_path):
    awkward = tmp_path / "100%, a:b"
    awkward.mkdir()
    (awkward / "train.py").write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    result = run(["--output-format", "github", "100%, a:b/train.py"], cwd=tmp_path, select="LL201")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == (
        "::warning file=100%25%2C a%3Ab/train.py,line=9,col=20,endLine=9,endColumn=70,"
        "title=loadlint (LL201)::`num_workers` is not set: batches are loaded in the training process, "
        "the accelerator waits; use `num_workers=3` (target: 4 CPUs, 1 GPU)"
    )


def test_github_clean_run_prints_nothing(tmp_path):
    (tmp_path / "ok.py").write_text("x = 1\n")
    result = run(["--output-format", "github", "ok.py"], cwd=tmp_path)
    assert result.exit_code == 0 and result.stdout == ""


# -- gitlab ------------------------------------------------------------------


def gitlab(cwd: Path, path: str = "train.py") -> list[dict]:
    result = run(["--output-format", "gitlab", path], cwd=cwd)
    assert result.exit_code == 1
    return json.loads(result.stdout)


def test_gitlab_code_quality_fields(tmp_path):
    (tmp_path / "train.py").write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    issues = gitlab(tmp_path)
    assert len(issues) == 5
    for issue in issues:
        assert {"description", "check_name", "fingerprint", "severity", "location"} <= set(issue)
        assert issue["severity"] in GITLAB_SEVERITIES
        assert issue["location"]["path"] == "train.py"
        assert isinstance(issue["location"]["lines"]["begin"], int)
        assert issue["description"].startswith(issue["check_name"] + " ")
    assert {i["check_name"]: i["severity"] for i in issues} == {"LL101": "major", "LL201": "minor", "LL202": "minor"}
    assert len({i["fingerprint"] for i in issues}) == len(issues)


def test_gitlab_fingerprints_survive_reruns_and_moved_lines(tmp_path):
    source = FIXTURE.read_text(encoding="utf-8")
    (tmp_path / "train.py").write_text(source, encoding="utf-8")
    first = gitlab(tmp_path)
    again = gitlab(tmp_path)
    (tmp_path / "train.py").write_text('"""Moved down by a new docstring."""\n\n' + source, encoding="utf-8")
    moved = gitlab(tmp_path)
    assert [i["fingerprint"] for i in first] == [i["fingerprint"] for i in again] == [i["fingerprint"] for i in moved]
    assert [i["location"]["lines"]["begin"] for i in moved] == [i["location"]["lines"]["begin"] + 2 for i in first]


def test_gitlab_syntax_error_is_a_blocker(tmp_path):
    (tmp_path / "train.py").write_text("from torch.utils.data import DataLoader\nDataLoader(\n")
    result = run(["--output-format", "gitlab", "train.py"], cwd=tmp_path, select="LL900")
    (issue,) = json.loads(result.stdout)
    assert issue["check_name"] == "LL900" and issue["severity"] == "blocker"


# -- junit / pylint ----------------------------------------------------------


def test_junit_is_well_formed_with_counts(tmp_path):
    (tmp_path / "train.py").write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    result = run(["--output-format", "junit", "train.py"], cwd=tmp_path)
    root = ET.fromstring(result.stdout.split("\n", 1)[1])
    assert root.tag == "testsuites" and root.get("tests") == "5" and root.get("failures") == "5"
    (suite,) = root
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["org.loadlint.LL101", "org.loadlint.LL201", "org.loadlint.LL202"] + [
        "org.loadlint.LL101"
    ] * 2
    assert cases[1].find("failure").text.startswith("line 9, col 20, `num_workers` is not set")


def test_junit_clean_run_has_a_passing_case(tmp_path):
    (tmp_path / "ok.py").write_text("x = 1\n")
    result = run(["--output-format", "junit", "ok.py"], cwd=tmp_path)
    root = ET.fromstring(result.stdout.split("\n", 1)[1])
    assert root.get("tests") == "1" and root.get("failures") == "0"


def test_pylint_lines(tmp_path):
    (tmp_path / "train.py").write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    result = run(["--output-format", "pylint", "train.py"], cwd=tmp_path, select="LL201")
    assert result.stdout.startswith("train.py:9: [LL201] `num_workers` is not set")
    assert len(result.stdout.splitlines()) == 1


# -- notebooks ---------------------------------------------------------------


def test_notebook_findings_point_at_the_line_of_the_file_and_name_the_cell(tmp_path):
    notebook = REPO / "tests" / "fixtures" / "notebooks" / "course_custom_dataset.ipynb"
    (tmp_path / "nb.ipynb").write_bytes(notebook.read_bytes())
    # Cell 5, row 3 is the JSON string on line 76 of the file.
    assert notebook.read_text(encoding="utf-8").splitlines()[75].strip().startswith('"val_loader = DataLoader(')
    github = run(["--output-format", "github", "nb.ipynb"], cwd=tmp_path, select="LL201").stdout.splitlines()
    assert github == [
        "::warning file=nb.ipynb,line=76,title=loadlint (LL201)::cell 5, line 3, column 14: `num_workers` is not set: "
        "batches are loaded in the training process, the accelerator waits; use `num_workers=3` (target: 4 CPUs, 1 GPU)"
    ]
    sarif = json.loads(run(["--output-format", "sarif", "nb.ipynb"], cwd=tmp_path, select="LL201").stdout)
    result = sarif["runs"][0]["results"][0]
    assert result["locations"][0]["physicalLocation"]["region"] == {"startLine": 76} and "fixes" not in result
    assert result["message"]["text"].startswith("cell 5, line 3, column 14: ")
    assert result["properties"]["cell"] == 5
    issues = json.loads(run(["--output-format", "gitlab", "nb.ipynb"], cwd=tmp_path, select="LL201").stdout)
    assert issues[0]["location"]["lines"] == {"begin": 76, "end": 76}
    pylint = run(["--output-format", "pylint", "nb.ipynb"], cwd=tmp_path, select="LL201").stdout
    assert pylint.startswith("nb.ipynb:76: [LL201] cell 5, line 3, column 14: ")


def test_a_notebook_on_one_line_points_at_line_one(tmp_path):
    notebook = REPO / "tests" / "fixtures" / "notebooks" / "compact.ipynb"
    (tmp_path / "nb.ipynb").write_bytes(notebook.read_bytes())
    github = run(["--output-format", "github", "nb.ipynb"], cwd=tmp_path, select="LL201").stdout
    assert github.startswith("::warning file=nb.ipynb,line=1,title=loadlint (LL201)::cell 1, line 2, column 10: ")
