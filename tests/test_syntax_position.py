"""LL900 is reported where the interpreter reports the SyntaxError."""

from __future__ import annotations

import json
from pathlib import Path

import libcst as cst
import pytest

import loadlint.engine.analysis as engine
from loadlint.engine.analysis import analyse
from loadlint.cst.syntax import interpreter_error, syntax_error
from loadlint.testing import EXAMPLE_PROFILE
from loadlint.types import Options

FIXTURES = Path(__file__).parent / "fixtures" / "notebooks"
OPTIONS = Options(select=frozenset({"LL900"}), profile_factory=lambda: EXAMPLE_PROFILE)

BROKEN = "import torch\nfrom torch.utils.data import DataLoader\n\ndef broken(:\n    DataLoader(\n"


def test_python_file_at_the_interpreters_position():
    [finding] = analyse(BROKEN, "b.py", OPTIONS)[0]
    # libcst gives up at 5:1; Python points at the colon.
    assert (finding.location.row, finding.location.column) == (4, 12)
    assert finding.message == "SyntaxError: invalid syntax"


def test_unclosed_bracket_points_at_the_bracket():
    text = "from torch.utils.data import DataLoader\nx = (1,\ny = DataLoader(ds\n"
    [finding] = analyse(text, "c.py", OPTIONS)[0]
    assert (finding.location.row, finding.location.column) == (3, 15)
    assert finding.message == "SyntaxError: '(' was never closed"


def test_notebook_error_is_mapped_to_its_cell():
    from loadlint.engine.notebook import check

    result = check(FIXTURES / "syntax_error.ipynb", (FIXTURES / "syntax_error.ipynb").read_bytes(), OPTIONS)
    got = [(f.cell, f.location.row, f.location.column, f.message) for f in result.findings]
    assert got == [
        (3, 1, 4, "SyntaxError: unexpected indent"),
        (4, 2, 15, "SyntaxError: '(' was never closed"),
    ]


def test_top_level_await_in_a_notebook_is_not_the_error(tmp_path):
    from loadlint.engine.notebook import check

    cells = [
        "from torch.utils.data import DataLoader\nawait setup()\n",
        "loader = DataLoader(ds\n",
    ]
    doc = {"cells": [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [], "execution_count": None}
                     for c in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(doc))
    [finding] = check(path, path.read_bytes(), OPTIONS).findings
    assert (finding.cell, finding.location.row, finding.location.column) == (2, 1, 20)


def test_parser_position_where_the_interpreter_accepts():
    # When Python compiles what libcst rejects (syntax newer than libcst
    # knows), there is no interpreter error: libcst's position stays.
    text = "x = (1,\n"
    with pytest.raises(cst.ParserSyntaxError) as caught:
        cst.parse_module(text)
    exc = caught.value
    assert syntax_error(text, exc, None)[1:] == (exc.raw_line, exc.raw_column + 1)


def test_positions_stay_inside_the_text():
    text = "from torch.utils.data import DataLoader\ndef f():\n"
    python = interpreter_error(text)
    assert python is not None
    with pytest.raises(cst.ParserSyntaxError) as caught:
        cst.parse_module(text)
    _, row, column = syntax_error(text, caught.value, python)
    assert 1 <= row <= 3 and column >= 1


def test_a_file_that_parses_is_not_compiled(monkeypatch):
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled a file that parses")

    monkeypatch.setattr(engine, "interpreter_error", refuse)
    findings, _ = analyse("from torch.utils.data import DataLoader\nl = DataLoader(ds, num_workers=2)\n", "ok.py", OPTIONS)
    assert findings == []


def test_compile_alone_judges_each_statement_as_the_whole_text() -> None:
    from loadlint.cst.syntax import compile_alone
    from loadlint.cst.rows import python_tree

    statements = ["import os\n", "def f():\n    return (1,\n        2)\n", "x = f(\n", "await g()\n", "a <> b\n"]
    for chosen in [[0, 1], [0, 2], [1, 3], [4]]:
        chunks = [statements[i] for i in chosen]
        text = "".join(chunks)
        assert compile_alone(text, chunks) == python_tree(text)[1], chosen
    # A __future__ import may change the grammar: the text is left to a compile of its own.
    text = "from __future__ import annotations\nx = 1\n"
    assert python_tree(text)[1] and not compile_alone(text, ["x = 1\n"])
