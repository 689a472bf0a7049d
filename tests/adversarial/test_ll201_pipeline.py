"""LL201's "not a loading pipeline" silences hold only where the dataset
really is in memory or a live source: a second binding to something else,
a helper that returns something else on one path, a caller passing an
untraced value, a collate function over an index tensor, a generator
method of another object all stay reported.  A worker fix for a
notebook whose dataset carries a notebook function stays withheld, while
a guarded script's top-level class (which spawn re-imports as
``__mp_main__``) gets it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from loadlint.api import check_source
from loadlint.engine.notebook import check
from loadlint.hardware.detect import parse_target, resolve_profile
from loadlint.types import Options

HEAD = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
from pl_bolts.datamodules import ExperienceSourceDataset
"""
#: Python 3.14 on Linux: workers start with forkserver.
FORKSERVER = resolve_profile(parse_target("cpus=8,gpus=1,platform=linux,python=3.14"))


def rows(body: str) -> list[int]:
    source = HEAD + textwrap.dedent(body)
    return [f.location.row for f in check_source(source, "m.py", select=["LL201"], profile=FORKSERVER)]


SILENT = {
    "a stored prompt returned with the index": """
        from torch.utils.data import Dataset
        class D(Dataset):
            def __init__(self, prompt):
                self.prompt = prompt
            def __getitem__(self, i):
                return self.prompt, i
        loader = DataLoader(D(args.prompt))
    """,
    "TensorDataset in both branches": """
        def main(args, a, b):
            if args.x:
                ds = TensorDataset(a)
            else:
                ds = TensorDataset(a, b)
            return DataLoader(ds)
    """,
    "a helper returning TensorDataset on every path": """
        def build(a, small):
            if small:
                return TensorDataset(a[:10])
            return TensorDataset(a)
        loader = DataLoader(build(torch.ones(4), True))
    """,
    "a parameter every caller passes a TensorDataset": """
        def evaluate(dataset):
            return DataLoader(dataset, batch_size=8)
        evaluate(TensorDataset(torch.ones(4)))
        evaluate(dataset=TensorDataset(torch.zeros(4)))
    """,
    "index tensor through where and a device move": """
        def f(mask):
            idx = torch.where(mask)[0].cpu()
            return DataLoader(idx, batch_size=8)
    """,
    "range over a method's result": """
        def f(t):
            return DataLoader(range(len(t) if t else t.size(0)), batch_size=8)
    """,
    "the model's generator, through a name": """
        class M:
            def steps(self):
                yield 1
            def train_dataloader(self):
                ds = ExperienceSourceDataset(self.steps)
                return DataLoader(ds)
    """,
}

REPORTED = {
    "a stored container bound to a name, then indexed": """
        from torch.utils.data import Dataset
        class D(Dataset):
            def __init__(self, rows):
                self.rows = rows
            def __getitem__(self, i):
                rows = self.rows
                return rows[i]
        loader = DataLoader(D(args.rows))
    """,
    "a stored object read into": """
        from torch.utils.data import Dataset
        class D(Dataset):
            def __init__(self, table):
                self.table = table
            def __getitem__(self, i):
                return self.table.rows
        loader = DataLoader(D(args.table))
    """,
    "a stored object set again outside __init__": """
        from torch.utils.data import Dataset
        class D(Dataset):
            def __init__(self, prompt):
                self.prompt = prompt
            def reload(self):
                self.prompt = read()
            def __getitem__(self, i):
                return self.prompt, i
        loader = DataLoader(D(args.prompt))
    """,
    "TensorDataset in one branch, a folder in the other": """
        def main(args, a, folder):
            ds = TensorDataset(a)
            if args.raw:
                ds = folder
            return DataLoader(ds)
    """,
    "a helper returning something else on one path": """
        def build(a, small):
            if small:
                return TensorDataset(a)
            return load(a)
        loader = DataLoader(build(torch.ones(4), True))
    """,
    "a helper with a bare return": """
        def build(a):
            if a is None:
                return
            return TensorDataset(a)
        loader = DataLoader(build(torch.ones(4)))
    """,
    "a parameter one caller passes something untraced": """
        def evaluate(dataset):
            return DataLoader(dataset, batch_size=8)
        evaluate(TensorDataset(torch.ones(4)))
        evaluate(load("x"))
    """,
    "a parameter no caller passes": """
        def evaluate(dataset):
            return DataLoader(dataset, batch_size=8)
    """,
    "an index tensor rebound to files": """
        def f(mask, files):
            idx = mask.nonzero().view(-1)
            idx = files
            return DataLoader(idx, batch_size=8)
    """,
    "an index tensor whose collate samples": """
        def f(mask, sample):
            return DataLoader(mask.nonzero().view(-1), batch_size=8, collate_fn=sample)
    """,
    "a range shadowed by a local function": """
        def range(n):
            return open(n)
        loader = DataLoader(range(3))
    """,
    "another object's generator": """
        class M:
            def train_dataloader(self):
                return DataLoader(ExperienceSourceDataset(self.env.steps))
    """,
    "a method of the model that returns, not yields": """
        class M:
            def steps(self):
                return iter(self.buffer)
            def train_dataloader(self):
                return DataLoader(ExperienceSourceDataset(self.steps))
    """,
    "self.dataset set to two datasets": """
        class M:
            def steps(self):
                yield 1
            def a(self):
                self.dataset = ExperienceSourceDataset(self.steps)
            def b(self):
                self.dataset = Folder("data")
            def train_dataloader(self):
                return DataLoader(self.dataset)
    """,
}


@pytest.mark.parametrize("body", SILENT.values(), ids=SILENT.keys())
def test_not_a_pipeline(body: str) -> None:
    assert rows(body) == []


@pytest.mark.parametrize("body", REPORTED.values(), ids=REPORTED.keys())
def test_still_a_pipeline(body: str) -> None:
    assert len(rows(body)) == 1


GUARDED = """\
import torch
from torch.utils.data import DataLoader, Dataset


def load(i):
    return torch.full((3,), float(i))


class Squares(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return load(i) ** 2


def main():
    loader = DataLoader(Squares(), batch_size=4)
    for batch in loader:
        batch.cuda()


if __name__ == "__main__":
    main()
"""


def test_a_guarded_scripts_own_class_gets_the_worker_fix() -> None:
    # Spawned and forkserver workers re-import the script as __mp_main__:
    # its top-level class and function are found there.
    (finding,) = check_source(GUARDED, "train.py", select=["LL201"], profile=FORKSERVER)
    assert finding.fix is not None and finding.fix_withheld is None
    assert finding.fix.applicability == "safe"


def notebook(*cells: str) -> bytes:
    return json.dumps({
        "cells": [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [], "execution_count": None} for c in cells],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }).encode()


@pytest.mark.parametrize("cells, name", [
    ((GUARDED.split("\n\ndef main")[0], "loader = DataLoader(Squares(), batch_size=4)\nfor b in loader:\n    b.cuda()"),
     "Squares"),
    (("from torch.utils.data import DataLoader\nfrom torchvision.datasets import ImageFolder\n"
      "def read(path):\n    return open(path, 'rb').read()",
      "loader = DataLoader(ImageFolder('data', loader=read), batch_size=2)\nfor b in loader:\n    b.cuda()"),
     "read"),
])
def test_a_notebook_dataset_carrying_a_notebook_function_gets_no_worker_fix(cells: tuple[str, ...], name: str) -> None:
    options = Options(select=frozenset({"LL201"}), profile_factory=lambda: FORKSERVER)
    (finding,) = check(Path("demo.ipynb"), notebook(*cells), options).findings
    assert finding.fix is None
    assert finding.fix_withheld is not None and finding.fix_withheld.startswith(f"no fix: `{name}` defined in the notebook")
