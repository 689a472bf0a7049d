"""Large modules are parsed in slices (loadlint.cst.slicing): the findings must be
those of a full parse.  Slicing is forced here with a threshold of zero."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadlint.cst import slicing
from loadlint.api import check_source
from loadlint.workspace.config import Settings
from loadlint.engine.analysis import analyse
from loadlint.engine.decision import fix_text
from loadlint.types import Options
from loadlint.hardware.detect import parse_target, resolve_profile
from loadlint.sources.source import decode
from loadlint.testing import iter_cases, run_case

FIXTURES = Path(__file__).parent / "fixtures"
PROFILE = resolve_profile(parse_target("cpus=8,gpus=4,memory=64,shm=16,platform=linux,python=3.12"))
ALL = Options(Settings(select=("ALL",)).codes_for("x.py"), lambda: PROFILE)


@pytest.fixture
def always_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slicing, "SLICE_ABOVE", 0)


def findings(text: str, name: str = "x.py") -> list[tuple[int, int, str, str, object]]:
    """(row, column, code, message, the whole finding: end and fix included)."""
    found, _ = analyse(text, name, ALL)
    return [(f.location.row, f.location.column, f.code, f.message, f) for f in found]


def sliced_and_full(monkeypatch: pytest.MonkeyPatch, text: str) -> tuple[list, list]:
    monkeypatch.setattr(slicing, "SLICE_ABOVE", 0)
    sliced = findings(text)
    monkeypatch.setattr(slicing, "SLICE_ABOVE", 10**12)
    return sliced, findings(text)


def padded(text: str) -> str:
    """``text`` with unrelated top-level assignments before every top-level statement."""
    out = []
    previous = ""
    for i, line in enumerate(text.splitlines(keepends=True)):
        # Not between a decorator and what it decorates: that would not parse.
        decorated = previous.startswith("@")
        previous = line
        if line[:1].isalpha() and not decorated and not line.startswith(("else", "elif", "except", "finally")):
            out.append(f"padding_{i}_a = {i} * 2\npadding_{i}_b = [padding_{i}_a, 'DataL' 'oader', {{'k': 1}}]\n")
        out.append(line)
    return "".join(out)


@pytest.mark.parametrize("path", sorted((FIXTURES / "checker").glob("*.py")), ids=lambda p: p.stem)
def test_golden_fixtures_same_findings(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = path.read_text(encoding="utf-8")
    settings = Settings(select=("ALL",))
    full = check_source(text, path.name, settings=settings, profile=PROFILE)
    monkeypatch.setattr(slicing, "SLICE_ABOVE", 0)
    assert check_source(text, path.name, settings=settings, profile=PROFILE) == full


@pytest.mark.parametrize("path", sorted((FIXTURES / "checker").glob("*.py")), ids=lambda p: p.stem)
def test_padded_fixtures_drop_the_padding_and_keep_the_findings(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = padded(path.read_text(encoding="utf-8"))
    sliced, full = sliced_and_full(monkeypatch, text)
    assert sliced == full
    piece = slicing.slice_module(text)
    assert "padding_" not in piece.text or "padding" in path.read_text(encoding="utf-8")
    assert piece.kept < piece.size


@pytest.mark.parametrize("case", list(iter_cases()), ids=str)
def test_rule_examples_hold_when_sliced(case, always_slice: None) -> None:
    assert run_case(case) == []


@pytest.mark.parametrize("path", sorted((FIXTURES / "fix").glob("*.in.py")), ids=lambda p: p.name[: -len(".in.py")])
def test_fixes_are_the_same_when_sliced(path: Path, always_slice: None) -> None:
    from tests.test_fix_golden import golden_options

    source = decode(path.read_bytes())
    fixed, _, _ = fix_text(padded(source.text), path.name, golden_options(source.text), unsafe=True)
    expected = decode(path.with_name(path.name.replace(".in.py", ".out.py")).read_bytes()).text
    # LL013's guard indents the padding with the statements around it.
    assert [line for line in fixed.splitlines() if not line.lstrip().startswith("padding_")] == expected.splitlines()


LOADER = "from torch.utils.data import DataLoader\n\nloader = DataLoader(images_ds)\n"


def test_a_syntax_error_in_a_dropped_statement_is_reported_where_a_full_parse_reports_it(monkeypatch):
    text = LOADER + "".join(f"value_{i} = {i}\n" for i in range(50)) + "broken = = 1\nlast = 2\n"
    sliced, full = sliced_and_full(monkeypatch, text)
    assert sliced == full
    assert [f[2] for f in full] == ["LL900"] and full[0][0] > 50


def test_rows_and_columns_map_back_with_crlf_and_no_final_line_break(monkeypatch):
    text = ("x_0 = 1\r\n" * 30 + LOADER + "y_0 = 2\n" * 30 + "for batch in loader: pass").replace("\n", "\r\n").replace("\r\r", "\r")
    sliced, full = sliced_and_full(monkeypatch, text)
    assert sliced == full
    assert full and full[0][0] == 33
    piece = slicing.slice_module(text)
    assert "x_0" not in piece.text and piece.rows[-1] == 30 + 3 + 30 + 1


def test_statements_sharing_a_name_with_a_kept_one_are_kept():
    text = (
        "import torch\nWORKERS = 0\nunrelated = [1, 2]\nclass Data(Base):\n    pass\nclass Base: pass\n"
        "from torch.utils.data import DataLoader\nloader = DataLoader(Data(), num_workers=WORKERS)\n"
        "loader.batch_size = 3\nother = len(unrelated)\n"
    )
    kept = slicing.slice_module(text).text
    for line in ("WORKERS = 0", "class Data(Base)", "class Base", "loader.batch_size = 3"):
        assert line in kept
    assert "unrelated" not in kept


def test_builtins_link_only_when_the_module_rebinds_them():
    base = "from torch.utils.data import DataLoader\nloader = DataLoader(range(len([1])))\nsize = len('abc')\n"
    assert "size" not in slicing.slice_module(base).text
    assert "size" in slicing.slice_module("def len(x): return 0\n" + base).text


def test_too_large_after_slicing_is_ll900(monkeypatch):
    monkeypatch.setattr(slicing, "SLICE_ABOVE", 0)
    monkeypatch.setattr(slicing, "MAX_PARSE", 10)
    found = findings(LOADER)
    assert [(f[0], f[2]) for f in found] == [(1, "LL900")]
    assert found[0][3].startswith("file too large to analyse: 72 characters, 72 of them in statements that can reach")


def test_a_large_generated_module_parses_only_what_matters():
    text = "".join(f"configuration_value_{i:05d} = {i} * 2 + len('abc')\n" for i in range(20_000)) + LOADER
    assert len(text) > slicing.SLICE_ABOVE
    piece = slicing.slice_module(text)
    assert piece.text == LOADER and piece.rows == [20_001, 20_002, 20_003]
    assert [(f[0], f[2]) for f in findings(text)] == [(20_003, "LL201")]


def test_a_lone_surrogate_in_a_dropped_statement_is_reported(monkeypatch):
    text = LOADER + "".join(f"value_{i} = {i}\n" for i in range(5)) + "text = '\ud800'\n"
    sliced, full = sliced_and_full(monkeypatch, text)
    assert sliced == full
    assert [f[:3] for f in full] == [(9, 9, "LL901")]


def test_deep_nesting_in_a_dropped_statement_is_reported_as_a_full_scan_reports_it(monkeypatch):
    text = LOADER + "".join(f"value_{i} = {i}\n" for i in range(5)) + "deep = " + "1 + " * 250 + "1\n"
    sliced, full = sliced_and_full(monkeypatch, text)
    assert sliced == full
    assert [f[:3] for f in full] == [(9, 806, "LL900")]


def test_a_string_prefix_is_not_a_name():
    text = "from torch.utils.data import DataLoader\nloader = DataLoader(range(3), prefetch_factor=f'{2}')\nlabel = f'x'\n"
    assert "label" not in slicing.slice_module(text).text


def test_a_decorator_stays_with_what_it_decorates():
    text = (
        "from dataclasses import dataclass\nfrom torch.utils.data import DataLoader\n"
        "@dataclass\n@other\nclass Config:\n    size: int = 3\nloader = DataLoader(range(3))\n"
        "@unrelated\ndef helper():\n    pass\n"
    )
    kept = slicing.slice_module(text).text
    assert "@dataclass\n@other\nclass Config:\n    size: int = 3\n" in kept
    assert "helper" not in kept and "@unrelated" not in kept


def test_parse_module_skips_node_checks_only_while_parsing() -> None:
    import libcst as cst

    module = slicing.parse_module("x = ( 1 )\n")
    assert module.code == "x = ( 1 )\n"
    assert cst.parse_module("y = 2\n").code == "y = 2\n"
    # Nodes built outside a parse are checked again, also after a failed parse.
    with pytest.raises(cst.ParserSyntaxError):
        slicing.parse_module("x = (\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")
    with pytest.raises(cst.CSTValidationError):
        cst.Comment("no hash")


def test_parse_module_still_rejects_what_this_python_does_not_take_as_a_name() -> None:
    import libcst as cst

    # libcst's node check rejects it; libcst 1.4's tokenizer already does.
    with pytest.raises((cst.CSTValidationError, cst.ParserSyntaxError), match="not a valid identifier"):
        slicing.parse_module("\U0002ebf0 = 1\n")
    assert slicing.parse_module("\u00e9t\u00e9 = 1\n").code == "\u00e9t\u00e9 = 1\n"
