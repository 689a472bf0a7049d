"""A notebook on stdin (``--stdin-filename nb.ipynb``) is read as notebook
JSON: ``check`` reports per cell, ``fix`` writes the notebook JSON to stdout
(only the fixed cell's ``source`` changed) and its report to stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "notebooks"
TARGET = ["--target", "cpus=4", "--target", "gpus=1", "--no-cache"]


def loadlint(*args: str, data: bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "loadlint", *args, *TARGET], input=data, capture_output=True, cwd=cwd)


def test_check_reads_the_notebook_json(tmp_path: Path) -> None:
    data = (FIXTURES / "compact.ipynb").read_bytes()
    proc = loadlint("check", "--select", "LL001", "--output-format", "json", "-", "--stdin-filename", "nb.ipynb", data=data, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    [finding] = json.loads(proc.stdout)
    assert (finding["filename"], finding["cell"], finding["location"]) == ("nb.ipynb", 1, {"row": 2, "column": 10})
    concise = loadlint("check", "--select", "LL001", "--output-format", "concise", "--stdin-filename", "nb.ipynb", data=data, cwd=tmp_path)
    assert concise.stdout.decode().startswith("nb.ipynb:cell 1:2:10: LL001")


def test_fix_writes_the_notebook_json_to_stdout(tmp_path: Path) -> None:
    data = (FIXTURES / "compact.ipynb").read_bytes()
    proc = loadlint("fix", "--select", "LL001", "-", "--stdin-filename", "nb.ipynb", data=data, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    expected = data.replace(b"batch_size=4, prefetch_factor=2)", b"batch_size=4)")
    assert expected != data and proc.stdout == expected
    assert b"1 fixed" in proc.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_fix_echoes_a_notebook_without_fixes_and_a_broken_one(tmp_path: Path) -> None:
    for name in ("compact.ipynb", "malformed.ipynb"):
        data = (FIXTURES / name).read_bytes()
        proc = loadlint("fix", "--select", "LL006", "-", "--stdin-filename", "nb.ipynb", data=data, cwd=tmp_path)
        assert proc.stdout == data, name
    broken = loadlint("check", "--select", "LL901", "-", "--stdin-filename", "nb.ipynb", data=data, cwd=tmp_path)
    assert broken.returncode == 1 and b"LL901 malformed notebook JSON" in broken.stdout


def test_diff_is_per_cell(tmp_path: Path) -> None:
    data = (FIXTURES / "compact.ipynb").read_bytes()
    proc = loadlint("fix", "--diff", "--select", "LL001", "-", "--stdin-filename", "nb.ipynb", data=data, cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout.decode().startswith("--- a/nb.ipynb:cell 1\n+++ b/nb.ipynb:cell 1\n")
