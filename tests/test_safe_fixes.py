"""Safe means it runs: a count that may be 0 gets `persistent_workers=<count> > 0`,
LL204 reaches counts known only at run time, and a notebook's loader gets
no workers unless its dataset's class is traced to an importable module."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPAWN_WHY = "no target platform is declared, and macOS and Windows spawn workers"

#: A notebook's Dataset class reached through a dict index (minGPT's demo).
_SQ = """import torch
from torch.utils.data import DataLoader, Dataset
class Sq(Dataset):
    def __len__(self):
        return 16
    def __getitem__(self, i):
        return torch.load(f"sq/{i}.pt")
"""


def loadlint(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loadlint", *args], capture_output=True, text=True, cwd=cwd)


def notebook(path: Path, *cells: str) -> Path:
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    doc = {"cells": [{**cell, "source": source} for source in cells], "metadata": {}, "nbformat": 4,
           "nbformat_minor": 4}
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


def findings(path: Path, *args: str) -> list[dict[str, object]]:
    proc = loadlint("check", "--no-cache", "--output-format", "json", *args, path.name, cwd=path.parent)
    assert proc.returncode in (0, 1), proc.stderr
    return list(json.loads(proc.stdout))


def only(path: Path, code: str, *args: str) -> dict[str, object]:
    [found] = [f for f in findings(path, "--select", code, *args) if f["code"] == code]
    return found


EVAL_SPLIT = """def eval_split(split):
    dataset = {'train': train_dataset, 'test': test_dataset}[split]
    loader = DataLoader(dataset, batch_size=4, num_workers=0)
    for x in loader:
        pass
"""


def test_dict_indexed_notebook_class_gets_no_workers(tmp_path):
    path = notebook(tmp_path / "demo.ipynb", _SQ, "train_dataset = Sq()\ntest_dataset = Sq()\n", EVAL_SPLIT)
    found = only(path, "LL201")
    assert found["fix"] is None
    assert found["fix_withheld"] == (
        "no fix: `Sq` defined in the notebook cannot be imported by workers started with spawn or forkserver "
        f"({SPAWN_WHY}); move the definitions to a `.py` module and import them first (LL012)"
    )
    before = path.read_bytes()
    proc = loadlint("fix", "--unsafe-fixes", "--select", "LL201", path.name, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert path.read_bytes() == before


def test_untraced_notebook_dataset_gets_no_workers(tmp_path):
    path = notebook(tmp_path / "nb.ipynb", _SQ, "def make(ds):\n    return DataLoader(ds, batch_size=4)\n")
    found = only(path, "LL201")
    assert found["fix"] is None
    assert found["fix_withheld"] == (
        f"no fix: the class of `ds` is not traced to an importable module, and workers started with spawn or "
        f"forkserver ({SPAWN_WHY}) cannot import a class defined in the notebook; build the dataset from a class "
        "imported from a `.py` module where the loader is built"
    )


@pytest.mark.parametrize("cell", [
    # Imported classes, through a dict index, a helper and a method chain: the workers import them too.
    "from mydata import Faces\ntrain = Faces()\ntest = Faces()\ndef pick(split):\n"
    "    return DataLoader({'train': train, 'test': test}[split], batch_size=4)\n",
    "from mydata import Faces\ndef build():\n    return Faces()\nloader = DataLoader(build(), batch_size=4)\n",
    "from datasets import load_dataset\nloader = DataLoader(load_dataset('x').with_format('torch')['train'])\n",
    # fork copies the kernel: the notebook's class is there.
    "loader = DataLoader(Sq(), batch_size=4, multiprocessing_context='fork')\n",
], ids=["dict-of-imports", "helper", "method-chain", "fork"])
def test_traced_notebook_dataset_keeps_the_fix(tmp_path, cell):
    path = notebook(tmp_path / "nb.ipynb", _SQ, cell)
    found = only(path, "LL201")
    assert "fix_withheld" not in found or found["fix_withheld"] is None
    assert found["fix"] is not None


def test_a_script_class_is_importable(tmp_path):
    # A script's `__main__` is its file: spawned workers import it again.
    path = tmp_path / "train.py"
    path.write_text(_SQ + "def main():\n    for x in DataLoader(Sq(), batch_size=4):\n        pass\n"
                    "if __name__ == '__main__':\n    main()\n", encoding="utf-8")
    assert only(path, "LL201")["fix"] is not None


SUPER_RESOLUTION = """import argparse
from torch.utils.data import DataLoader
parser = argparse.ArgumentParser()
parser.add_argument('--threads', type=int, default=4, help='number of threads for data loader to use')
opt = parser.parse_args()
def main(train_set):
    training_data_loader = DataLoader(dataset=train_set, num_workers=opt.threads, batch_size=4, shuffle=True)
    for epoch in range(3):
        for batch in training_data_loader:
            pass
"""


def test_command_line_count_is_persistent_only_with_workers(tmp_path):
    path = tmp_path / "main.py"
    path.write_text(SUPER_RESOLUTION, encoding="utf-8")
    proc = loadlint("fix", "--select", "LL204", path.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert path.read_text(encoding="utf-8") == SUPER_RESOLUTION.replace(
        "shuffle=True)", "shuffle=True, persistent_workers=opt.threads > 0)"
    )


def test_fix_then_check_on_the_examples_reaches_the_fixed_point(tmp_path):
    tree = tmp_path / "examples"
    shutil.copytree(ROOT / "examples", tree)
    proc = loadlint("fix", "--no-cache", ".", cwd=tree)
    assert proc.returncode in (0, 1), proc.stderr
    text = (tree / "train_cpu.py").read_text(encoding="utf-8")
    assert "num_workers=LOADER_WORKERS, persistent_workers=LOADER_WORKERS > 0)" in text
    ddp = (tree / "train_ddp.py").read_text(encoding="utf-8")
    assert ddp.count("persistent_workers=LOADER_WORKERS > 0") == 2
    after = findings(tree, "--no-cache")
    assert [f for f in after if f["code"] == "LL204"] == []
    assert [f for f in after if f["fix"] is not None and f["fix"]["applicability"] == "safe"] == []
    snapshot = {p: p.read_bytes() for p in tree.rglob("*.py")}
    loadlint("fix", "--no-cache", ".", cwd=tree)
    assert {p: p.read_bytes() for p in tree.rglob("*.py")} == snapshot


SEGMENTATION = """import os
from torch.utils.data import DataLoader
def train_model(train_set, device, epochs=5, batch_size=1):
    loader_args = dict(batch_size=batch_size, num_workers=os.cpu_count(), pin_memory=True)
    train_loader = DataLoader(train_set, shuffle=True, **loader_args)
    for epoch in range(1, epochs + 1):
        for batch in train_loader:
            batch["image"].to(device=device)
"""


def test_keyword_dict_with_the_cpu_count_gets_persistent_workers(tmp_path):
    # Pytorch-UNet's shape: `dict(...)` of loader arguments, `os.cpu_count()` workers, an epoch loop.
    path = tmp_path / "train.py"
    path.write_text(SEGMENTATION, encoding="utf-8")
    found = only(path, "LL204")
    assert found["message"] == (
        "`persistent_workers` is not set: the workers of this loader (`num_workers=os.cpu_count()`) are started "
        "again at every epoch; set `persistent_workers=True`"
    )
    proc = loadlint("fix", "--select", "LL204", path.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert path.read_text(encoding="utf-8") == SEGMENTATION.replace(
        "**loader_args)", "**loader_args, persistent_workers=True)"
    )
