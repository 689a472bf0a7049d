"""``# noqa`` read as ruff reads it: every code of a list, an invalid one
reported (LL902) without disabling the valid ones; ``--add-noqa`` writes
only directives that suppress."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loadlint.engine.noqa import add_noqa
from loadlint.engine.suppress import file_suppressions, suppressed_codes

TARGET = ["--no-cache", "--target", "cpus=8,gpus=0"]
HEAD = "from torch.utils.data import DataLoader\n"


def _main(args, cwd: Path, capsys):
    from loadlint.frontends.cli import main

    old = os.getcwd()
    os.chdir(cwd)
    try:
        code = main(args)
    finally:
        os.chdir(old)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("line, codes", [
    ("x  # noqa: LL2O1,LL201", {"LL2O1", "LL201"}),
    ("x  # noqa: LL2O1, LL201", {"LL2O1", "LL201"}),
    ("x  # noqa: LL201 LL2O1", {"LL2O1", "LL201"}),
    ("x  # noqa:LL201,,E501", {"LL201", "E501"}),
    ("x  # NOQA: ll201", {"LL201"}),
    ("x  # noqa: LL201 see issue 12", {"LL201"}),
    ("x  # noqa: LL201, see LL202", {"LL201"}),
    ("x  # noqa", {"*"}),
    ("x  # noqa: see below", {"*"}),
    ("x  # nothing", None),
])
def test_every_code_of_a_list_is_read(line, codes):
    assert suppressed_codes(line) == codes


def test_file_level_list_reads_past_an_invalid_code():
    assert file_suppressions("# loadlint: noqa: LL2O1, LL201\n") == {"LL2O1", "LL201"}


def test_invalid_code_first_does_not_disable_the_valid_one(tmp_path, capsys):
    (tmp_path / "m.py").write_text(HEAD + "a = DataLoader(ds, batch_size=4)  # noqa: LL2O1,LL201\n")
    code, out, _ = _main(["check", *TARGET, "--output-format", "concise", "m.py"], tmp_path, capsys)
    assert (code, out) == (1, (
        "m.py:2:35: LL902 [*] `# noqa` suppresses nothing with `LL2O1`: `LL2O1` is no loadlint rule code "
        "(did you mean `LL201`?); remove it\n"
        "Found 1 problem (0 errors, 1 warning).\n"
        "[*] 1 fixable with --fix.\n"
    ))
    code, out, _ = _main(["fix", *TARGET, "m.py"], tmp_path, capsys)
    assert (code, out) == (0, "Found 1 problem (1 fixed, 0 remaining).\n")
    assert (tmp_path / "m.py").read_text() == HEAD + "a = DataLoader(ds, batch_size=4)  # noqa: LL201\n"


def test_add_noqa_over_an_invalid_code_writes_a_directive_that_suppresses(tmp_path, capsys):
    (tmp_path / "m.py").write_text(
        HEAD + "a = DataLoader(ds, batch_size=4)  # noqa: LL2O1\n"
        "b = DataLoader(ds, batch_size=4)  # noqa: LL2O1, E501  why\n"
    )
    code, out, err = _main(["check", *TARGET, "--add-noqa", "m.py"], tmp_path, capsys)
    assert (code, out, err) == (0, "Added 2 noqa directives.\n", "")
    assert (tmp_path / "m.py").read_text() == (
        HEAD + "a = DataLoader(ds, batch_size=4)  # noqa: LL201\n"
        "b = DataLoader(ds, batch_size=4)  # noqa: E501, LL201  why\n"
    )
    code, out, _ = _main(["check", *TARGET, "m.py"], tmp_path, capsys)
    assert (code, out) == (0, "All checks passed!\n")


def test_add_noqa_does_not_count_a_directive_a_string_would_shadow(tmp_path, capsys):
    # The line's first ``# noqa`` is inside the string: a comment after it would not suppress.
    source = HEAD + 'a = DataLoader(ds, batch_size=4); tag = "# noqa: E501"\n'
    (tmp_path / "m.py").write_text(source)
    code, out, err = _main(["check", *TARGET, "--add-noqa", "m.py"], tmp_path, capsys)
    assert (code, out, err) == (
        0, "Added 0 noqa directives.\n", "loadlint: warning: m.py:2: no `# noqa` there would suppress LL201\n"
    )
    assert (tmp_path / "m.py").read_text() == source


def test_add_noqa_refuses_every_row_of_text_tokenize_refuses():
    assert add_noqa('x = """\n', {1: {"LL201"}}) == ('x = """\n', 0, [1])
