"""Line magics that run a statement (``%time stmt``, ``%timeit -n 1 stmt``,
``%prun -s key stmt``): the statement is analysed where it stands, and a fix
on its line gives the magic back."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from loadlint.api import FixRequest
from loadlint.engine.ipython import Masker
from loadlint.engine.notebook import check
from loadlint.types import HardwareProfile, Options

PROFILE = HardwareProfile(
    usable_cpus=8,
    gpu_count=1,
    platform="linux",
    python="3.11",
    declared=frozenset({"cpus", "gpus", "platform", "python", "memory", "shm"}),
)


def write_nb(path: Path, *sources: str) -> Path:
    nb = new_notebook()
    nb.cells = [new_code_cell(source) for source in sources]
    nbformat.write(nb, str(path))
    return path


def options(*codes: str) -> Options:
    return Options(frozenset(codes), lambda: PROFILE)


@pytest.mark.parametrize(
    ("line", "statement"),
    [
        ("%time train(model, loader, device)", "train(model, loader, device)"),
        ("%time  x = f(y)", "x = f(y)"),
        ("%timeit -n 1 -r 2 x = f(y)", "x = f(y)"),
        ("%timeit -q -o f()", "f()"),
        ("%prun -s cumulative train()", "train()"),
        ("%time -x", "-x"),
        ("    %time batch = next(it)", "batch = next(it)"),
    ],
)
def test_the_statement_keeps_its_columns_and_the_line_comes_back(line, statement):
    masker = Masker()
    source = f"for _ in range(1):\n{line}\n" if line.startswith(" ") else f"{line}\n"
    masked = masker.mask(source)
    assert masked is not None
    kept = masked.splitlines()[-1]
    assert kept.endswith(statement) and len(kept) == len(line)
    assert kept.index(statement) == line.index(statement)
    compile(masked, "<cell>", "exec")
    assert masker.unmask(masked) == source


@pytest.mark.parametrize(
    "line",
    [
        "%time",
        "%timeit -q",
        "%timeit -n",
        "%prun -s",
        "%time for x in y: f(x)",
        "%time f(",
        "%time f(x) \\",
        "%time f($x)",
        "%matplotlib inline",
        "t = %time f()",
    ],
)
def test_a_line_that_is_no_single_statement_stays_a_placeholder(line):
    masker = Masker()
    masked = masker.mask(f"{line}\n")
    assert masked is not None and masked.startswith("__loadlint_ipython_")
    assert masker.kept == []


@pytest.mark.parametrize(
    ("line", "module"),
    [
        ("%run helpers.py", "helpers"),
        ("%run -i ./utils/data.py --epochs 3", "utils.data"),
        ("%run helpers.ipynb", None),
        ("%run -m helpers", None),
        ("%run '../helpers.py'", None),
        ("%run $script", None),
        ("    %run helpers.py", None),
    ],
)
def test_run_reads_as_a_star_import_of_its_module(line, module):
    masker = Masker()
    source = f"if x:\n{line}\n" if line.startswith(" ") else f"{line}\n"
    masked = masker.mask(source)
    assert masked is not None
    last = masked.splitlines()[-1].strip()
    if module is None:
        assert last.startswith("__loadlint_ipython_")
    else:
        assert last.startswith(f"from {module} import *; __loadlint_ipython_")
    compile(masked, "<cell>", "exec")
    assert masker.unmask(masked) == source


def test_a_cell_that_writes_pass_itself_keeps_no_statement():
    masker = Masker()
    source = "pass;  f()\n%time g()\n"
    masked = masker.mask(source)
    assert masked is not None and "g()" not in masked
    assert masker.unmask(masked) == source


def test_a_fix_on_a_kept_line_gives_each_magic_its_own_prefix_back():
    masker = Masker()
    source = "%time a = x.to(d)\n%prun -s t b = y.to(d)\n"
    masked = masker.mask(source)
    assert masked is not None
    edited = masked.replace("x.to(d)", "x.to(d, non_blocking=True)")
    assert masker.unmask(edited) == "%time a = x.to(d, non_blocking=True)\n%prun -s t b = y.to(d)\n"


LOADER = "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True)"


def test_a_call_under_time_reaches_the_rules_at_its_own_column(tmp_path):
    path = write_nb(
        tmp_path / "nb.ipynb",
        LOADER,
        "for epoch in range(3):\n    for x in loader:\n        %time x = x.to('cuda')",
    )
    result = check(path, path.read_bytes(), options("LL205"))
    assert [(f.code, f.cell, f.location.row, f.location.column) for f in result.findings] == [("LL205", 2, 3, 19)]


def test_fixing_a_statement_under_time_keeps_the_magic(tmp_path):
    path = write_nb(
        tmp_path / "nb.ipynb",
        LOADER,
        "for epoch in range(3):\n    for x in loader:\n        %time x = x.to('cuda')",
    )
    result = check(path, path.read_bytes(), options("LL205"), FixRequest())
    assert result.applied == {"LL205": 1}
    cells = nbformat.read(str(path), as_version=4).cells
    assert cells[1].source == "for epoch in range(3):\n    for x in loader:\n        %time x = x.to('cuda', non_blocking=True)"
    assert cells[0].source == LOADER


def test_without_the_statement_kept_the_call_was_unseen(tmp_path):
    """The same cell with the statement behind a magic that runs no code
    (``%run``) stays silent: what the magic hides is not guessed."""
    path = write_nb(
        tmp_path / "nb.ipynb",
        LOADER,
        "for epoch in range(3):\n    for x in loader:\n        %run step.py",
    )
    assert check(path, path.read_bytes(), options("LL205")).findings == []
