"""LL012 and LL013 against torch itself: the INVALID shapes crash under
``multiprocessing_context="spawn"``, the VALID ones yield a batch, and
loadlint reports exactly the crashing ones.

A notebook's ``__main__`` is simulated the way a kernel looks to pickle: the
cells are exec'd in a fresh module named ``__main__`` that has no file and
no spec, so a spawned worker cannot import it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loadlint.api import check_source
from loadlint.types import Options
from loadlint.engine.notebook import check
from loadlint.rules import CODES
from loadlint.types import HardwareProfile

torch = pytest.importorskip("torch", reason="torch is not installed: the crash reproductions need it")
pytestmark = pytest.mark.torch

TIMEOUT = 240
#: The CI box is Linux: declare it, so only multiprocessing_context decides.
LINUX_311 = HardwareProfile(
    usable_cpus=2, gpu_count=0, platform="linux", python="3.11", declared=frozenset({"cpus", "gpus", "platform", "python"})
)

DATASET_CELL = textwrap.dedent(
    """
    import torch
    from torch.utils.data import DataLoader, Dataset

    class FaceDataset(Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            return torch.full((3,), float(i))
    """
)
IMPORTED_CELL = "import torch\nfrom torch.utils.data import DataLoader\nfrom faces import FaceDataset\n"
LOADER_CELL = textwrap.dedent(
    """
    loader = DataLoader(FaceDataset(), batch_size=4, num_workers={workers}, multiprocessing_context={context})
    batch = next(iter(loader))
    print("BATCH", tuple(batch.shape))
    """
)

KERNEL = textwrap.dedent(
    """
    import json, sys, types
    cells = json.load(open(sys.argv[1], encoding="utf-8"))
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = main
    for source in cells:
        exec(compile(source, "<cell>", "exec"), main.__dict__)
    """
)


def run_cells(tmp_path: Path, cells: list[str]) -> subprocess.CompletedProcess:
    (tmp_path / "faces.py").write_text(DATASET_CELL, encoding="utf-8")
    (tmp_path / "cells.json").write_text(json.dumps(cells), encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-c", KERNEL, str(tmp_path / "cells.json")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=TIMEOUT,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )


def notebook_codes(tmp_path: Path, cells: list[str]) -> list[str]:
    doc = {
        "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": c} for c in cells],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "lesson.ipynb"
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    result = check(path, path.read_bytes(), Options(frozenset(CODES), lambda: LINUX_311))
    assert result.error is None
    return [f.code for f in result.findings if f.code in ("LL012", "LL013", "LL007", "LL900")]


def test_ll012_invalid_crashes_in_a_notebook_main(tmp_path):
    cells = [DATASET_CELL, LOADER_CELL.format(workers=1, context='"spawn"')]
    proc = run_cells(tmp_path, cells)
    assert proc.returncode != 0
    assert "Can't get attribute 'FaceDataset' on <module '__main__'" in proc.stderr, proc.stderr[-3000:]
    assert notebook_codes(tmp_path, cells) == ["LL012"]


def test_ll012_notebook_collate_fn_crashes_too(tmp_path):
    cells = [
        IMPORTED_CELL + "def stack(batch):\n    return torch.stack(batch)\n",
        "loader = DataLoader(FaceDataset(), batch_size=4, num_workers=1, collate_fn=stack,\n"
        "                    multiprocessing_context='spawn')\nprint(next(iter(loader)).shape)\n",
    ]
    proc = run_cells(tmp_path, cells)
    assert proc.returncode != 0
    assert "Can't get attribute 'stack' on <module '__main__'" in proc.stderr, proc.stderr[-3000:]
    assert notebook_codes(tmp_path, cells) == ["LL012"]


@pytest.mark.parametrize(
    "cells",
    [
        # The Dataset imported from a .py module: the workers import it too.
        [IMPORTED_CELL, LOADER_CELL.format(workers=1, context='"spawn"')],
        # Kept in the notebook, loaded in the kernel process.
        [DATASET_CELL, LOADER_CELL.format(workers=0, context="None")],
        # fork copies the kernel: its classes are there.
        [DATASET_CELL, LOADER_CELL.format(workers=1, context='"fork"')],
    ],
    ids=["imported", "no-workers", "fork"],
)
def test_ll012_valid_yields_a_batch_and_is_silent(tmp_path, cells):
    proc = run_cells(tmp_path, cells)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "BATCH (4, 3)" in proc.stdout
    assert notebook_codes(tmp_path, cells) == []


SCRIPT = textwrap.dedent(
    """
    import torch
    from torch.utils.data import DataLoader
    from faces import FaceDataset

    loader = DataLoader(FaceDataset(), batch_size=4, num_workers=1, multiprocessing_context="spawn")
    """
)
UNGUARDED = SCRIPT + "for batch in loader:\n    print('BATCH', tuple(batch.shape))\n"
GUARDED = SCRIPT + "if __name__ == '__main__':\n    for batch in loader:\n        print('BATCH', tuple(batch.shape))\n"


def run_script(tmp_path: Path, source: str) -> subprocess.CompletedProcess:
    (tmp_path / "faces.py").write_text(DATASET_CELL, encoding="utf-8")
    (tmp_path / "train.py").write_text(source, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "train.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=TIMEOUT,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )


def script_codes(source: str) -> list[str]:
    findings = check_source(source, "train.py", profile=LINUX_311, select=CODES)
    return [f.code for f in findings if f.code in ("LL012", "LL013")]


def test_ll013_invalid_crashes_without_a_main_guard(tmp_path):
    proc = run_script(tmp_path, UNGUARDED)
    assert proc.returncode != 0
    assert "bootstrapping phase" in proc.stderr, proc.stderr[-3000:]
    assert script_codes(UNGUARDED) == ["LL013"]


def test_ll013_valid_with_a_main_guard_yields_batches(tmp_path):
    proc = run_script(tmp_path, GUARDED)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("BATCH (4, 3)") == 2
    assert script_codes(GUARDED) == []


def test_ll013_fork_is_silent_and_works(tmp_path):
    source = UNGUARDED.replace('"spawn"', '"fork"')
    proc = run_script(tmp_path, source)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert script_codes(source) == []
