"""Reading and writing files (loadlint.sources.files): the diff both .py files and
notebook cells use, and the messages for fixes that cannot be written."""

from pathlib import Path

from loadlint.sources.files import unified_diff, write_fixes


def test_diff_splits_lines_as_python_does():
    # A form feed or a Unicode line separator is inside a line for Python:
    # str.splitlines() would cut there and misnumber the hunk.
    before = "a = 1\x0cb\nc = 2\u2028d\nloader = DataLoader(ds)\n"
    after = before.replace("DataLoader(ds)", "DataLoader(ds, num_workers=3)")
    diff = unified_diff("t.py", before, after)
    assert diff.split("\n")[2:] == [
        "@@ -1,3 +1,3 @@",
        " a = 1\x0cb",
        " c = 2\u2028d",
        "-loader = DataLoader(ds)",
        "+loader = DataLoader(ds, num_workers=3)",
        "",
    ]


def test_diff_marks_a_missing_final_newline():
    diff = unified_diff("t.py", "x = 1", "x = 2")
    assert diff.endswith("-x = 1\n\\ No newline at end of file\n+x = 2\n\\ No newline at end of file\n")
    assert unified_diff("t.py", "same\n", "same\n") == ""


def test_write_fixes_says_why_nothing_was_written(tmp_path: Path):
    path = tmp_path / "t.py"
    path.write_bytes(b"changed meanwhile\n")
    assert write_fixes(path, b"what we read\n", b"fixed\n") == "file changed on disk while it was being fixed; not written"
    assert path.read_bytes() == b"changed meanwhile\n"
    assert write_fixes(path, b"changed meanwhile\n", b"fixed\n") is None
    assert path.read_bytes() == b"fixed\n"
    assert write_fixes(tmp_path / "missing.py", b"", b"x\n").startswith("cannot write fixes: ")
