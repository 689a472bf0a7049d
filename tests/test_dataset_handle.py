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
    # A loop over the loader: a loader read for one batch gets no LL201.
    text = script("text").replace(", num_workers=2", "").replace(
        "next(iter(loader))", "for batch in loader:\n            print(batch)"
    )
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


DATA_MODULE = """\
import lmdb
from torch.utils.data import Dataset


class Frames(Dataset):
    def __init__(self, path):
        self.env = lmdb.open(path, readonly=True)
"""

TRAIN = """\
from torch.utils.data import DataLoader
from data import Frames


def main():
    loader = DataLoader(Frames("db"), num_workers=4{extra})
    for batch in loader:
        pass
"""


def _project_check(folder: Path, target: str) -> list[dict]:
    import json
    import os

    from click.testing import CliRunner

    from loadlint.frontends.cli import cli

    old = os.getcwd()
    os.chdir(folder)
    try:
        out = CliRunner().invoke(
            cli, ["check", "--isolated", "--no-cache", "--select", "LL014", "--target", target, "--output-format", "json", "."],
            env={"NO_COLOR": "1", "LOADLINT_CACHE_DIR": None}, catch_exceptions=False,
        ).output
    finally:
        os.chdir(old)
    return json.loads(out)


@pytest.mark.parametrize(
    ("extra", "target", "reported"),
    [
        ("", "cpus=8,gpus=0,platform=macos,python=3.12", True),
        ("", "cpus=8,gpus=0,platform=linux,python=3.12", False),
        (', multiprocessing_context="forkserver"', "cpus=8,gpus=0,platform=linux,python=3.12", True),
        (', multiprocessing_context="fork"', "cpus=8,gpus=0,platform=macos,python=3.12", False),
        (", multiprocessing_context=ctx", "cpus=8,gpus=0,platform=macos,python=3.12", False),
        (")  # noqa: LL014\n#(", "cpus=8,gpus=0,platform=macos,python=3.12", False),
    ],
    ids=["macos", "linux-fork", "forkserver", "fork", "unknown-context", "noqa"],
)
def test_a_class_from_another_module_is_reported_at_the_loader(
    tmp_path: Path, extra: str, target: str, reported: bool
) -> None:
    (tmp_path / "pyproject.toml").touch()
    (tmp_path / "data.py").write_text(DATA_MODULE)
    (tmp_path / "train.py").write_text(TRAIN.format(extra=extra))
    records = _project_check(tmp_path, target)
    if not reported:
        assert records == []
        return
    [record] = records
    assert (record["filename"].endswith("train.py"), record["location"]["row"]) == (True, 6)
    why = ("the target platform is macos, where workers are spawned" if "macos" in target
           else '`multiprocessing_context="forkserver"`')
    assert record["message"] == (
        "`Frames.__init__` (`data.py`) stores an `lmdb` environment on the dataset (`self.env = lmdb.open(...)`), and "
        f"the DataLoader's 4 workers may start with spawn or forkserver ({why}): starting them pickles the dataset, "
        "which fails (`TypeError: cannot pickle 'Environment' object`); open it in the worker instead: "
        "`self.env = None` in `__init__`, opened on the first `__getitem__` (or in a `worker_init_fn`)"
    )
