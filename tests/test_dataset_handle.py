"""LL014: a dataset holding a handle opened in ``__init__`` under spawn or
forkserver; the message quotes what torch really raises."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loadlint.engine.pipeline import check_bytes
from loadlint.hardware.detect import parse_target, resolve_profile
from loadlint.types import FixRequest, Options

MACOS = resolve_profile(parse_target("cpus=8,gpus=0,platform=macos,python=3.12"))
LINUX_312 = resolve_profile(parse_target("cpus=8,gpus=0,platform=linux,python=3.12"))

SCRIPT = """\
import sys
{imports}
from torch.utils.data import DataLoader, Dataset


class Records(Dataset):
    def __init__(self, path):
        self.handle = {opener}

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return i


if __name__ == "__main__":
    loader = DataLoader(Records(sys.argv[1]), batch_size=2, num_workers=2, multiprocessing_context="{method}")
    try:
        next(iter(loader))
    except TypeError as exc:
        print(f"TypeError: {{exc}}")
"""

OPENERS = {
    "text": ("", "open(path)"),
    "binary": ("", 'open(path, "rb")'),
    "lmdb": ("import lmdb", "lmdb.open(path + '.lmdb', map_size=1 << 20)"),
    "h5py": ("import h5py", 'h5py.File(path + ".h5", "w")'),
}


def script(kind: str, method: str = "spawn") -> str:
    imports, opener = OPENERS[kind]
    return SCRIPT.format(imports=imports, opener=opener, method=method)


def findings(text: str, profile=MACOS, path: str = "train.py") -> list:
    options = Options(frozenset({"LL014"}), lambda: profile)
    return check_bytes(text.encode(), path, options).findings


def quoted(message: str) -> str:
    found = re.search(r"\(`(TypeError: [^`]+)`\)", message)
    assert found is not None, message
    return found.group(1)


@pytest.mark.parametrize("kind", sorted(OPENERS))
def test_each_handle_is_reported_at_its_open_call(kind: str) -> None:
    text = script(kind)
    [finding] = findings(text)
    assert finding.code == "LL014" and finding.location.row == 8
    assert finding.fix is None
    assert "`Records.__init__` stores " in finding.message and "(`multiprocessing_context=\"spawn\"`)" in finding.message


def test_fork_is_silent() -> None:
    assert findings(script("lmdb", "fork")) == []
    assert findings(script("text").replace(', multiprocessing_context="spawn"', ""), LINUX_312) == []


def test_one_finding_per_class_however_many_loaders() -> None:
    text = script("text").replace("    try:\n", "    other = DataLoader(Records('b'), num_workers=4, multiprocessing_context='spawn')\n    try:\n")
    assert len(findings(text)) == 1


def test_notebooks_are_left_to_ll012() -> None:
    assert findings(script("text"), path="train.ipynb") == []


def test_adding_workers_to_such_a_loader_is_withheld() -> None:
    text = script("text").replace(", num_workers=2", "")
    options = Options(frozenset({"LL201"}), lambda: MACOS)
    result = check_bytes(text.encode(), "train.py", options, FixRequest(unsafe=True, dry_run=True))
    assert result.fixed is None
    [finding] = [f for f in result.findings if f.code == "LL201"]
    assert finding.fix is None and finding.fix_withheld is not None
    assert finding.fix_withheld.startswith("no fix: set `num_workers=") and "would introduce LL014" in finding.fix_withheld


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.parametrize("method", ["spawn", "forkserver"])
@pytest.mark.parametrize("kind", sorted(OPENERS))
def test_torch_raises_what_the_message_quotes(tmp_path: Path, kind: str, method: str) -> None:
    pytest.importorskip("torch")
    if kind in ("lmdb", "h5py"):
        pytest.importorskip(kind)
    text = script(kind, method)
    [finding] = findings(text)
    path = tmp_path / "train.py"
    path.write_text(text)
    data = tmp_path / "records"
    data.write_text("a\nb\n")
    run = subprocess.run([sys.executable, str(path), str(data)], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == quoted(finding.message)
