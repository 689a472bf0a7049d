"""Reading and writing files (loadlint.sources.files): the diff both .py files and
notebook cells use, and the messages for fixes that cannot be written."""

import errno
import os
from pathlib import Path

import pytest

from loadlint.sources.files import KeptBytes, Staging, read_resolved, read_source, unified_diff, write_fixes


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


def test_read_source_reads_whole_files_and_refuses_what_is_not_one(tmp_path: Path):
    big = bytes(range(256)) * 1000  # more than one read's worth
    (tmp_path / "big.py").write_bytes(big)
    assert read_source(tmp_path / "big.py") == big
    assert read_resolved(tmp_path / "big.py", str(tmp_path)) == (os.path.realpath(tmp_path / "big.py"), big)
    assert read_resolved(tmp_path / "big.py") == (None, big)
    with pytest.raises(OSError) as over:
        read_source(tmp_path / "big.py", limit=len(big) - 1)
    assert over.value.errno == errno.EFBIG
    with pytest.raises(IsADirectoryError):
        read_source(tmp_path)
    os.mkfifo(tmp_path / "pipe.py")
    with pytest.raises(OSError, match="not a regular file"):
        read_source(tmp_path / "pipe.py")


def test_kept_bytes_are_read_as_the_disk_would_be_within_a_folder(tmp_path: Path):
    inside, outside = tmp_path / "repo", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    (inside / "a.py").write_bytes(b"kept\n")
    (outside / "b.py").write_bytes(b"secret\n")
    (inside / "link.py").symlink_to(outside / "b.py")
    staging = Staging()
    kept = KeptBytes(budget=15, staging=staging)
    kept.keep(inside / "a.py", *read_resolved(inside / "a.py", str(inside)))
    (inside / "a.py").write_bytes(b"changed on disk\n")
    assert kept.read(str(inside / "a.py"), str(inside)) == b"kept\n"
    # Kept under a wider folder, refused under one its real path is outside of.
    kept.keep(inside / "link.py", *read_resolved(inside / "link.py", str(tmp_path)))
    (outside / "b.py").write_bytes(b"secret, changed\n")
    assert kept.read(str(inside / "link.py"), str(tmp_path)) == b"secret\n"
    with pytest.raises(OSError) as refused:
        kept.read(str(inside / "link.py"), str(inside))
    assert refused.value.errno == errno.EACCES
    # Over the budget (5 + 7 + 4 bytes > 15): read again from the disk.
    (inside / "c.py").write_bytes(b"big\n")
    kept.keep(inside / "c.py", *read_resolved(inside / "c.py", str(inside)))
    # Read without a folder, the real path is not known: not kept.
    kept.keep(inside / "d.py", None, b"d\n")
    assert list(kept.files) == [str(inside / "a.py"), str(inside / "link.py")]
    # A dry run's staged bytes win over what was kept.
    staging.stage(inside / "a.py", b"staged\n")
    assert kept.read(str(inside / "a.py"), str(inside)) == b"staged\n"
    # Another run's kept bytes never see this run's staging.
    other = KeptBytes(budget=15)
    other.keep(inside / "c.py", *read_resolved(inside / "c.py", str(inside)))
    assert other.read(str(inside / "a.py"), str(inside)) == b"changed on disk\n"


def test_two_runs_do_not_see_each_others_staging(tmp_path: Path):
    (tmp_path / "a.py").write_bytes(b"disk\n")
    first, second = Staging(), Staging()
    first.stage(tmp_path / "a.py", b"first\n")
    assert first.read(tmp_path / "a.py") == b"first\n"
    assert second.read(tmp_path / "a.py") == b"disk\n"
    assert read_source(tmp_path / "a.py") == b"disk\n"
    second.stage(tmp_path / "a.py", b"second\n")
    assert (first.read(tmp_path / "a.py"), second.read(tmp_path / "a.py")) == (b"first\n", b"second\n")
    # Staged under the real path: a link to the file reads the same bytes.
    (tmp_path / "link.py").symlink_to(tmp_path / "a.py")
    assert first.read_resolved(tmp_path / "link.py", str(tmp_path)) == (str(tmp_path / "a.py"), b"first\n")


def test_a_staged_read_still_refuses_a_link_out_of_the_folder(tmp_path: Path):
    inside, outside = tmp_path / "repo", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    (outside / "b.py").write_bytes(b"secret\n")
    (inside / "link.py").symlink_to(outside / "b.py")
    staging = Staging()
    staging.stage(outside / "b.py", b"staged\n")
    with pytest.raises(OSError) as refused:
        staging.read(inside / "link.py", str(inside))
    assert refused.value.errno == errno.EACCES
    assert staging.read(inside / "link.py") == b"staged\n"
