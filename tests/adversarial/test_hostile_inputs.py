"""Hostile and odd inputs, one test each, through the real command line.

Every run must end with findings or one clear line, never a traceback, a
signal or a hang; LL900/LL901 findings carry a position.
"""

from __future__ import annotations

import codecs
import json
import os
import sys
import time
from pathlib import Path

import pytest

from loadlint.engine.analysis import analyse

from loadlint.cst.syntax import MAX_NESTING, nesting_depth, too_deep_at
from loadlint.cst.syntax import nesting_bound

TARGET = "cpus=4,gpus=1"
LOADER = b"from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=8)\n"
BASIC = (Path(__file__).parent / "fixtures" / "basic.py").read_bytes()


def codes(findings: list[dict]) -> list[str]:
    return sorted(f["code"] for f in findings)


def check(cli, *paths: str, **kw) -> list[dict]:
    return cli.json("check", "--no-cache", "--target", TARGET, *paths, **kw)


def test_empty_file(cli, tmp_path):
    (tmp_path / "empty.py").write_bytes(b"")
    (tmp_path / "only_word.py").write_bytes(b"DataLoader")
    assert check(cli, "empty.py", "only_word.py") == []
    cli.run("fix", "--no-cache", "empty.py", ok=(0,))
    assert (tmp_path / "empty.py").read_bytes() == b""


def test_ten_megabyte_generated_file(cli, tmp_path):
    # Generated modules are mostly data: long literal lines, as protobuf's
    # _pb2 files and embedded assets are.
    row = repr(bytes(range(256)) * 16)
    body = "".join(f"    {row},\n" for _ in range(10 * 1024 * 1024 // (len(row) + 6) + 1))
    text = LOADER.decode() + "BLOB = [\n" + body + "]\n"
    assert len(text) >= 10 * 1024 * 1024
    (tmp_path / "generated.py").write_text(text)
    start = time.monotonic()
    assert codes(check(cli, "generated.py")) == ["LL201"]
    assert time.monotonic() - start < 120


def test_ten_megabyte_file_without_a_loader_is_not_parsed(cli, tmp_path):
    line = "x_0 = [1, 2, 3] * 4  # padding padding padding padding padding\n"
    (tmp_path / "big.py").write_text(line * (10 * 1024 * 1024 // len(line) + 1))
    start = time.monotonic()
    assert check(cli, "big.py") == []
    assert time.monotonic() - start < 60


#: Constructs libcst nests one level per repetition; thousands deep they
#: overflowed the native parser's stack (SIGSEGV) or took minutes.
DEEP = {
    "parens": lambda n: "x = " + "(" * n + "1" + ")" * n,
    "lists": lambda n: "x = " + "[" * n + "]" * n,
    "dicts": lambda n: "x = " + "{1: " * n + "1" + "}" * n,
    "not": lambda n: "x = " + "not " * n + "1",
    "unary": lambda n: "x = " + "-~" * n + "1",
    "lambda": lambda n: "x = " + "lambda: " * n + "1",
    "ternary": lambda n: "x = " + "1 if y else " * n + "1",
    "power": lambda n: "x = " + "2**" * n + "1",
    "sum": lambda n: "x = " + "+".join(["1"] * n),
    "attribute": lambda n: "x = a" + ".b" * n,
    "call": lambda n: "x = f" + "()" * n,
    "subscript": lambda n: "x = a" + "[0]" * n,
    "strings": lambda n: "x = " + "'a' " * n,
    "fstrings": lambda n: "x = " + "f'{" * n + "1" + "}'" * n,
    "comprehension": lambda n: "x = [x " + "for x in y " * n + "]",
    "await": lambda n: "async def f():\n    x = " + "await (" * n + "1" + ")" * n,
}


def test_deep_nesting_is_too_complex_not_a_crash(cli, tmp_path):
    for name, make in DEEP.items():
        (tmp_path / f"deep_{name}.py").write_bytes(LOADER + make(5000).encode() + b"\n")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    findings = check(cli, ".", timeout=240)
    assert {Path(f["filename"]).name for f in findings} == set(before)
    for finding in findings:
        assert finding["code"] == "LL900", finding
        assert "too complex" in finding["message"]
        assert finding["location"]["row"] in (3, 4), finding  # the deep line
    cli.run("fix", "--no-cache", "--target", TARGET, ".", timeout=240)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


def test_deep_nesting_through_the_console_script(cli, tmp_path):
    # The hard crash was in native code: only a separate process shows it.
    (tmp_path / "deep.py").write_bytes(LOADER + DEEP["lambda"](20000).encode() + b"\n")
    proc = cli.run("check", "--no-cache", "--output-format", "concise", "deep.py", console_script=True)
    assert b"LL900" in proc.stdout and b"too complex" in proc.stdout


@pytest.mark.parametrize("name", sorted(DEEP))
def test_nesting_estimate_bounds_each_construct(name):
    assert nesting_depth(DEEP[name](MAX_NESTING + 1)) > MAX_NESTING


@pytest.mark.parametrize("name", sorted(DEEP))
def test_the_guard_scans_every_line_that_could_be_too_deep(name):
    # The guard skips a logical line by two bounds of the estimate: its
    # length and the brackets, operators, quotes and keywords it holds.
    for n in (MAX_NESTING // 4, MAX_NESTING // 2 + 1, MAX_NESTING - 1, MAX_NESTING + 1):
        line = DEEP[name](n)
        depth = nesting_depth(line)
        assert depth <= len(line) and min(depth, MAX_NESTING + 1) <= nesting_bound(line, 0, len(line)), (n, depth)
        assert (too_deep_at(line + "\n") is not None) == (depth > MAX_NESTING), n


def test_nesting_within_the_limit_is_analysed(options):
    text = (LOADER + DEEP["parens"](150).encode() + b"\n").decode()
    findings, _ = analyse(text, "x.py", options)
    assert [f.code for f in findings] == ["LL201"]


def test_strings_and_comments_do_not_count_as_nesting():
    text = "# " + "(" * 1000 + "\n" + 'DOC = """' + "-" * 1000 + "[" * 1000 + '"""\n' + "s = '" + "-" * 1000 + "'\n"
    assert nesting_depth(text) < 10


def test_recursion_in_the_visitors_is_too_complex(options):
    # Under the estimate's limit, but each list level is two libcst nodes:
    # the metadata visitors recurse past Python's limit first.
    text = (LOADER + DEEP["lists"](MAX_NESTING - 5).encode() + b"\n").decode()
    findings, _ = analyse(text, "x.py", options)
    assert [f.code for f in findings] in (["LL201"], ["LL900"])


def test_binary_file_named_py(cli, tmp_path):
    data = bytes(range(256)) * 8 + b"DataLoader(\x00\x01\x02" + os.urandom(512)
    (tmp_path / "blob.py").write_bytes(data)
    [finding] = check(cli, "blob.py")
    assert finding["code"] == "LL901"
    assert finding["location"]["row"] >= 1 and finding["location"]["column"] >= 1
    cli.run("fix", "--no-cache", "blob.py")
    assert (tmp_path / "blob.py").read_bytes() == data


def test_nul_byte_in_utf8_text(cli, tmp_path):
    (tmp_path / "nul.py").write_bytes(BASIC.replace(b"def train", b"\x00def train"))
    [finding] = check(cli, "nul.py")
    assert finding["code"] == "LL901" and "NUL" in finding["message"]
    assert finding["location"] == {"row": 5, "column": 1}


def test_latin1_with_coding_line(cli, tmp_path):
    data = b"# -*- coding: latin-1 -*-\n# r\xe9sum\xe9 of the run\n" + BASIC
    (tmp_path / "latin.py").write_bytes(data)
    assert codes(check(cli, "latin.py")) == ["LL201", "LL202"]
    cli.run("fix", "--no-cache", "--target", TARGET, "latin.py", ok=(0,))
    fixed = (tmp_path / "latin.py").read_bytes()
    assert fixed.startswith(b"# -*- coding: latin-1 -*-\n# r\xe9sum\xe9 of the run\n")
    assert b"num_workers=3" in fixed


def test_latin1_without_coding_line(cli, tmp_path):
    data = b"# r\xe9sum\xe9\n" + BASIC
    (tmp_path / "latin.py").write_bytes(data)
    [finding] = check(cli, "latin.py")
    assert finding["code"] == "LL901" and "0xe9" in finding["message"]
    assert finding["location"] == {"row": 1, "column": 4}
    cli.run("fix", "--no-cache", "latin.py")
    assert (tmp_path / "latin.py").read_bytes() == data


def test_utf16_with_bom(cli, tmp_path):
    files = {
        "le.py": BASIC.decode().encode("utf-16"),
        "be.py": codecs.BOM_UTF16_BE + BASIC.decode().encode("utf-16-be"),
        "wide.py": BASIC.decode().encode("utf-32"),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    findings = check(cli, *files)
    assert sorted(f["filename"] for f in findings) == sorted(files)
    assert all(f["code"] == "LL901" and "UTF-16" in f["message"] for f in findings)
    cli.run("fix", "--no-cache", *files)
    assert {name: (tmp_path / name).read_bytes() for name in files} == files


@pytest.mark.parametrize("ending", ["crlf", "cr", "mixed"])
def test_line_endings(cli, tmp_path, ending):
    lines = BASIC.split(b"\n")[:-1]
    if ending == "mixed":
        data = b"".join(line + (b"\n", b"\r\n", b"\r")[i % 3] for i, line in enumerate(lines))
    else:
        data = b"".join(line + {"crlf": b"\r\n", "cr": b"\r"}[ending] for line in lines)
    (tmp_path / "ends.py").write_bytes(data)
    findings = check(cli, "ends.py")
    assert codes(findings) == ["LL201", "LL202"]
    # Rows as Python counts them: CR, LF and CRLF (a CR then an LF is one).
    row = next(i for i, line in enumerate(data.decode().splitlines(), 1) if "DataLoader(" in line)
    assert {f["location"]["row"] for f in findings} == {row}
    cli.run("fix", "--no-cache", "--target", TARGET, "ends.py", ok=(0,))
    fixed = (tmp_path / "ends.py").read_bytes()
    # Every line but the fixed ones is byte-identical, line ending included.
    old, new = data.splitlines(keepends=True), fixed.splitlines(keepends=True)
    assert len(old) == len(new)
    changed = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
    assert changed and len(changed) <= 2
    assert all(new[i][-1:] == old[i][-1:] for i in range(len(old)))


def test_tabs(cli, tmp_path):
    data = BASIC.replace(b"    ", b"\t")
    (tmp_path / "tabs.py").write_bytes(data)
    assert codes(check(cli, "tabs.py")) == ["LL201", "LL202"]
    cli.run("fix", "--no-cache", "--target", TARGET, "tabs.py", ok=(0,))
    fixed = (tmp_path / "tabs.py").read_bytes()
    assert b"num_workers=3" in fixed and b"\t\tfor inputs" in fixed
    compile(fixed, "tabs.py", "exec")


def test_python2_syntax(cli, tmp_path):
    data = LOADER + b'print "epoch done"\nexec "x = 1"\n'
    (tmp_path / "py2.py").write_bytes(data)
    [finding] = check(cli, "py2.py")
    assert finding["code"] == "LL900"
    assert finding["location"]["row"] in (3, 4)  # libcst reads `print "x"` as far as `exec`
    cli.run("fix", "--no-cache", "py2.py")
    assert (tmp_path / "py2.py").read_bytes() == data


NEWEST = b'''\
from torch.utils.data import DataLoader

type Batch = list[int]


def first[T](items: list[T]) -> T:
    return items[0]


class Box[T]:
    def __init__(self, item: T) -> None:
        self.item = item


def run(ds, command):
    match command:
        case {"epochs": int(n)} if (m := n * 2) > 0:
            print(m)
        case [x, *rest]:
            print(x, rest)
        case _:
            pass
    try:
        pass
    except* ValueError as group:
        print(group)
    print(f"{'nested' + f"{command!r:>{10}}"}")
    loader = DataLoader(ds, batch_size=8)
    for batch in loader:
        batch.cuda()
'''


def test_newest_syntax_libcst_supports(cli, tmp_path):
    (tmp_path / "new.py").write_bytes(NEWEST)
    assert codes(check(cli, "new.py")) == ["LL201", "LL202"]
    cli.run("fix", "--no-cache", "--target", TARGET, "new.py", ok=(0,))
    fixed = (tmp_path / "new.py").read_bytes()
    assert fixed == NEWEST.replace(b"batch_size=8)", b"batch_size=8, num_workers=3, pin_memory=True)").replace(
        b"batch.cuda()", b"batch.cuda(non_blocking=True)"
    )


def test_symlink_loop_and_dangling_symlink_in_the_tree(cli, tmp_path):
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "train.py").write_bytes(BASIC)
    os.symlink("..", tree / "pkg" / "up")
    os.symlink("loop_b", tree / "loop_a")
    os.symlink("loop_a", tree / "loop_b")
    os.symlink("missing.py", tree / "dangling.py")
    os.symlink("loop_a", tree / "loop.py")
    findings = check(cli, "tree", timeout=60)
    assert [(Path(f["filename"]).name, f["code"]) for f in findings] == [("train.py", "LL201"), ("train.py", "LL202")]
    cli.run("fix", "--no-cache", "--target", TARGET, "tree", ok=(0,), timeout=60)
    assert os.readlink(tree / "dangling.py") == "missing.py"


def test_dangling_symlink_named_explicitly(cli, tmp_path):
    os.symlink("missing.py", tmp_path / "dangling.py")
    [finding] = check(cli, "dangling.py")
    assert finding["code"] == "LL901" and finding["location"] == {"row": 1, "column": 1}


def test_fifo_and_device_are_not_read(cli, tmp_path):
    # Reading either would block or never end.
    os.mkfifo(tmp_path / "pipe.py")
    os.symlink("/dev/zero", tmp_path / "zero.py")
    (tmp_path / "tree").mkdir()
    os.mkfifo(tmp_path / "tree" / "pipe.py")
    findings = check(cli, "pipe.py", "zero.py", "tree", timeout=60)
    assert [(f["filename"], f["code"]) for f in findings] == [("pipe.py", "LL901"), ("zero.py", "LL901")]
    assert all("not a regular file" in f["message"] for f in findings)
    cli.run("fix", "--no-cache", "pipe.py", "zero.py", "tree", timeout=60)


def test_file_removed_during_the_run(tmp_path, monkeypatch):
    from loadlint.api import ProfileCache
    from loadlint.types import Target
    from loadlint.workspace.config import Overrides, ConfigResolver
    from loadlint.workspace.discover import discover
    from loadlint.run.runner import lint_candidates

    for i in range(5):
        (tmp_path / f"m{i}.py").write_bytes(BASIC)
    resolver = ConfigResolver(Overrides(target=Target(cpus=4, gpus=1)), isolated=True)

    def vanishing():
        for candidate in discover([tmp_path], resolver.for_path):
            if candidate.path.name == "m2.py":
                candidate.path.unlink()
            yield candidate

    run = lint_candidates(vanishing(), profiles=ProfileCache(), jobs=1)
    by_name = {Path(r.path).name: [f.code for f in r.findings] for r in run.results}
    assert by_name.pop("m2.py") == ["LL901"]
    assert set(by_name) == {"m0.py", "m1.py", "m3.py", "m4.py"}


def test_file_made_unreadable_during_the_run(tmp_path, monkeypatch):
    from loadlint import api
    from loadlint.api import ProfileCache
    from loadlint.types import Target
    from loadlint.workspace.config import Overrides, ConfigResolver
    from loadlint.workspace.discover import discover
    from loadlint.run.runner import lint_candidates

    for i in range(3):
        (tmp_path / f"m{i}.py").write_bytes(BASIC)
    resolver = ConfigResolver(Overrides(target=Target(cpus=4, gpus=1)), isolated=True)
    real_open = os.open

    # Permission bits do not stop root, so the refusal is simulated.
    def refusing(path, flags, *args, **kw):
        if str(path).endswith("m1.py"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kw)

    candidates = list(discover([tmp_path], resolver.for_path))
    monkeypatch.setattr(api.os, "open", refusing)
    run = lint_candidates(candidates, profiles=ProfileCache(), jobs=1)
    by_name = {Path(r.path).name: r for r in run.results}
    [finding] = by_name["m1.py"].findings
    assert finding.code == "LL901" and "Permission denied" in finding.message
    assert [f.code for f in by_name["m0.py"].findings] == ["LL201", "LL202"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_through_the_cli(cli, tmp_path):
    (tmp_path / "secret.py").write_bytes(BASIC)
    (tmp_path / "secret.py").chmod(0)
    [finding] = check(cli, "secret.py")
    assert finding["code"] == "LL901"


NON_UTF8 = pytest.mark.skipif(sys.platform == "darwin", reason="macOS refuses file names that are not UTF-8")
FORMATS = ["full", "concise", "json", "json-lines", "sarif", "github", "gitlab", "junit", "pylint"]


@NON_UTF8
def test_non_utf8_file_name(cli, tmp_path, monkeypatch):
    from loadlint.frontends.cli import main

    with open(os.path.join(os.fsencode(tmp_path), b"caf\xe9_\xff.py"), "wb") as handle:
        handle.write(BASIC)
    for fmt in ("full", "sarif"):
        proc = cli.run("check", "--no-cache", "--target", TARGET, "--output-format", fmt, ".")
        assert proc.returncode == 1 and proc.stdout
    # Every format, into a file, in this process (a subprocess each is slow).
    monkeypatch.chdir(tmp_path)
    for fmt in FORMATS:
        report = tmp_path / "out" / f"report.{fmt}"
        code = main(["check", "--no-cache", "--target", TARGET, "--output-format", fmt, "-o", str(report), "."])
        assert code == 1, fmt
        assert b"\xff" in report.read_bytes() or b"\\udcff" in report.read_bytes() or b"%FF" in report.read_bytes(), fmt


@NON_UTF8
def test_non_utf8_file_name_on_a_strict_utf8_terminal(cli, tmp_path):
    # Under a UTF-8 locale (not C.UTF-8) stdout refuses lone surrogates.
    with open(os.path.join(os.fsencode(tmp_path), b"caf\xe9_\xff.py"), "wb") as handle:
        handle.write(BASIC)
    strict = {"PYTHONIOENCODING": "utf-8:strict"}
    for fmt in ("full", "github", "junit"):
        proc = cli.run("check", "--no-cache", "--target", TARGET, "--output-format", fmt, ".", env=strict)
        assert proc.returncode == 1 and b"caf" in proc.stdout
    proc = cli.run("check", "--no-cache", "--target", TARGET, "--diff", ".", env=strict)
    assert proc.returncode == 1 and b"+++ b/caf" in proc.stdout
    cli.run("fix", "--no-cache", "--target", TARGET, "--show-fixes", ".", ok=(0,), env={"PYTHONIOENCODING": "ascii:strict"})


@NON_UTF8
def test_non_utf8_file_name_is_fixed(cli, tmp_path):
    path = os.path.join(os.fsencode(tmp_path), b"\xff.py")
    with open(path, "wb") as handle:
        handle.write(BASIC)
    cli.run("fix", "--no-cache", "--target", TARGET, "--show-fixes", ".", ok=(0,))
    with open(path, "rb") as handle:
        assert b"num_workers=3" in handle.read()


def test_directory_named_like_a_module(cli, tmp_path):
    (tmp_path / "x.py").mkdir()
    (tmp_path / "x.py" / "inner.py").write_bytes(BASIC)
    (tmp_path / "empty.py").mkdir()
    findings = check(cli, "x.py", "empty.py")
    assert {(f["filename"], f["code"]) for f in findings} == {("x.py/inner.py", "LL201"), ("x.py/inner.py", "LL202")}
    assert codes(check(cli, ".")) == ["LL201", "LL202"]


def test_stdin_hostile_bytes(cli):
    for data in (b"DataLoader(\x00\xff", LOADER + DEEP["not"](3000).encode() + b"\n"):
        cli.run("check", "--no-cache", "-", stdin=data)
        # Fixing stdin echoes the source whenever nothing could be fixed.
        assert cli.run("fix", "--no-cache", "-", stdin=data).stdout == data


def notebook(*sources: str) -> str:
    cells = [
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": source}
        for source in sources
    ]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def test_notebook_cell_nested_thousands_deep(cli, tmp_path):
    (tmp_path / "deep.ipynb").write_text(
        notebook("from torch.utils.data import DataLoader\n", "x = " + "not " * 20000 + "1\nl = DataLoader(ds)\n")
    )
    [finding] = check(cli, "deep.ipynb")
    assert finding["code"] == "LL900" and "too complex" in finding["message"] and finding["cell"] == 2
    cli.run("fix", "--no-cache", "deep.ipynb")


def test_lone_surrogate_in_a_notebook(cli, tmp_path):
    # JSON can escape what UTF-8 cannot encode.
    text = notebook("from torch.utils.data import DataLoader\nx = 'SURROGATE'\nl = DataLoader(ds)\n")
    (tmp_path / "odd.ipynb").write_text(text.replace("SURROGATE", "\\ud800"))
    [finding] = check(cli, "odd.ipynb", env={"PYTHONIOENCODING": "utf-8:strict"})
    assert finding["code"] == "LL901" and "surrogate" in finding["message"]
    assert finding["location"] == {"row": 2, "column": 6}
    for fmt in ("full", "concise"):
        cli.run("check", "--no-cache", "--output-format", fmt, "odd.ipynb", env={"PYTHONIOENCODING": "utf-8:strict"})
    cli.run("fix", "--no-cache", "--unsafe-fixes", "odd.ipynb", env={"PYTHONIOENCODING": "utf-8:strict"})


def test_lone_surrogate_through_the_api():
    from loadlint.api import check_source, fix_source

    text = "from torch.utils.data import DataLoader\nx = '\ud800'\nl = DataLoader(ds)\n"
    [finding] = check_source(text)
    assert finding.code == "LL901" and (finding.location.row, finding.location.column) == (2, 6)
    assert fix_source(text)[0] == text


@pytest.mark.parametrize("char", ["\x0c", "\x0b", "\u2028", "\u2029", "\x85", "\x1c", "\ufeff", "\u200b"])
def test_odd_line_breaks_and_spaces_keep_fix_edits_in_place(options, char):
    # Python's str.splitlines breaks at these, Python's tokenizer does not:
    # edits computed from rows and columns must land on the call anyway.
    from loadlint.engine.decision import fix_text

    text = BASIC.decode().replace("import torch\n", f'import torch  # a{char}b\nS = "x{char}y"\n')
    fixed, _, applied = fix_text(text, "x.py", options, unsafe=False)
    before, after = text.split("\n"), fixed.split("\n")
    assert applied and len(before) == len(after)
    changed = [(a, b) for a, b in zip(before, after) if a != b]
    assert changed and all("DataLoader(" in a or ".cuda(" in a for a, _ in changed)


@pytest.mark.parametrize("name", sorted(DEEP))
def test_only_long_logical_lines_are_scanned_and_positions_hold(name):
    """``too_deep_at`` scans only logical lines longer than half the limit:
    a deep construct after short lines, inside a multi-line statement, or
    after a string holding brackets is still found where a full scan finds it."""
    deep = DEEP[name](MAX_NESTING + 1)
    short = "a = 1\nb = (2,\n     3)\n" * 40
    layouts = [
        short + deep + "\n",
        short + "call(\n    1,\n    " + deep.replace("x = ", "", 1) + ",\n)\n" if not deep.startswith("async") else short + deep,
        'DOC = """((((\n[[[["""\n' + deep,
    ]
    for text in layouts:
        at = too_deep_at(text)
        assert at is not None
        row = text.count("\n", 0, text.index(deep.split("\n")[-1][:8] if name == "await" else deep.replace("x = ", "", 1)[:8])) + 1
        assert at[0] == row, (name, text[-200:])
    assert too_deep_at(short * 10 + DEEP[name](MAX_NESTING // 3)) is None
