"""Notebooks: reading, positions, IPython syntax, LL900/LL901, and fixes
that leave every byte outside the edited ``source`` entries alone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loadlint.api import FixRequest
from loadlint.types import Options
from loadlint.sources.nbjson import source_spans
from loadlint.engine.ipython import Masker
from loadlint.engine.notebook import check
from loadlint.rules import CODES
from loadlint.types import HardwareProfile

nbformat = pytest.importorskip("nbformat")
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "notebooks"
PROFILE = HardwareProfile(
    usable_cpus=8,
    gpu_count=0,
    platform="linux",
    python="3.11",
    declared=frozenset({"cpus", "gpus", "platform", "python", "memory", "shm"}),
)
PORTABLE = HardwareProfile(usable_cpus=8, gpu_count=0, declared=frozenset({"cpus", "gpus"}))
ALL = frozenset(CODES)


def options(select=ALL, profile=PROFILE) -> Options:
    return Options(frozenset(select), lambda: profile)


def run_check(path: Path, select=ALL, profile=PROFILE):
    return check(path, path.read_bytes(), options(select, profile))


def run_fix(path: Path, select=ALL, profile=PROFILE, unsafe=False, dry_run=False):
    return check(path, path.read_bytes(), options(select, profile), FixRequest(unsafe=unsafe, dry_run=dry_run))


def positions(result):
    return [(f.code, f.cell, f.location.row, f.location.column) for f in result.findings]


def write_nb(path: Path, cells, **kwargs) -> Path:
    nb = new_notebook()
    nb.cells = cells
    nbformat.write(nb, str(path), **kwargs)
    return path


def outside_sources(text: str) -> str:
    """The notebook text with every cell's ``source`` value cut out."""
    spans = source_spans(text)
    pieces, last = [], 0
    for index in sorted(spans):
        span = spans[index]
        pieces.append(text[last : span.start])
        pieces.append(f"<source of cell {index}>")
        last = span.end
    pieces.append(text[last:])
    return "".join(pieces)


def cell_sources(path: Path) -> dict[int, str]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    out = {}
    for i, cell in enumerate(doc["cells"], 1):
        src = cell["source"]
        out[i] = "".join(src) if isinstance(src, list) else src
    return out


def assert_only_sources_changed(before: bytes, after: bytes, changed: set[int]) -> None:
    old, new = before.decode("utf-8-sig"), after.decode("utf-8-sig")
    assert before.startswith(b"\xef\xbb\xbf") == after.startswith(b"\xef\xbb\xbf")
    assert outside_sources(old) == outside_sources(new)
    old_spans, new_spans = source_spans(old), source_spans(new)
    for index in old_spans:
        same = old[old_spans[index].start : old_spans[index].end] == new[new_spans[index].start : new_spans[index].end]
        assert same == (index not in changed), index


# -- reading and positions ---------------------------------------------------------


def test_course_notebook_positions_are_per_cell():
    result = run_check(FIXTURES / "course_custom_dataset.ipynb", profile=PORTABLE)
    assert positions(result) == [
        ("LL012", 5, 1, 16),
        ("LL001", 5, 3, 14),
        ("LL201", 5, 3, 14),
    ]
    assert "FaceDataset" in result.findings[0].message
    assert result.error is None


def test_an_import_in_one_cell_resolves_a_call_in_a_later_one(tmp_path):
    path = write_nb(
        tmp_path / "nb.ipynb",
        [
            new_code_cell("import torch.utils.data as tud"),
            new_markdown_cell("text"),
            new_code_cell("x = 1"),
            new_code_cell("loader = tud.DataLoader(ds, batch_size=4,\n    timeout=5)"),
        ],
    )
    result = run_check(path, select={"LL006"})
    assert positions(result) == [("LL006", 4, 1, 10)]


def test_cell_index_counts_markdown_and_raw_cells(tmp_path):
    nb_cells = [new_markdown_cell("a"), nbformat.v4.new_raw_cell("DataLoader(x)"), new_code_cell("from torch.utils.data import DataLoader\nDataLoader(ds, timeout=1)")]
    result = run_check(write_nb(tmp_path / "nb.ipynb", nb_cells), select={"LL006"})
    assert positions(result) == [("LL006", 3, 2, 1)]


def test_noqa_in_a_cell_suppresses_and_file_level_noqa_applies_to_the_notebook(tmp_path):
    cells = [
        new_code_cell("from torch.utils.data import DataLoader"),
        new_code_cell("a = DataLoader(ds, timeout=1)  # noqa: LL006\nb = DataLoader(ds, timeout=1)"),
    ]
    result = run_check(write_nb(tmp_path / "nb.ipynb", cells), select={"LL006"})
    assert positions(result) == [("LL006", 2, 2, 5)]
    cells.append(new_code_cell("# loadlint: noqa: LL006"))
    result = run_check(write_nb(tmp_path / "nb2.ipynb", cells), select={"LL006"})
    assert result.findings == []


def test_notebook_without_dataloader_is_not_parsed(tmp_path):
    path = tmp_path / "nb.ipynb"
    # Telling that it is no JSON costs a JSON parse, not an analysis: reported.
    path.write_text('{"cells": [  broken json', encoding="utf-8")
    assert [f.code for f in run_check(path).findings] == ["LL901"]
    write_nb(path, [new_code_cell("def f(:\n  pass")])
    assert run_check(path).findings == []


def test_empty_notebook_is_clean(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text('{"cells": [], "metadata": {"about": "DataLoader"}, "nbformat": 4, "nbformat_minor": 5}')
    assert run_check(path).findings == []


# -- IPython syntax ------------------------------------------------------------------


def test_ipython_syntax_is_masked_and_non_python_cell_magics_are_skipped():
    result = run_check(FIXTURES / "magics.ipynb", select=ALL - {"LL201"})
    assert positions(result) == [("LL006", 2, 2, 10), ("LL001", 7, 3, 11)]


@pytest.mark.parametrize(
    "line",
    [
        "%matplotlib inline",
        "!pip install torch",
        "files = !ls",
        "t = %timeit -o f()",
        "a, b = %sx echo 1",
        "DataLoader?",
        "DataLoader??",
        "?DataLoader",
        "??torch.utils.data",
        "torch.utils.data.DataLoader.__init__?",
        "%pip install \\\n    numpy \\\n  pandas",
    ],
)
def test_masked_lines_keep_line_count_and_come_back(line):
    masker = Masker()
    source = f"import torch\n{line}\nx = 1\n"
    masked = masker.mask(source)
    assert masked is not None
    assert masked.count("\n") == source.count("\n")
    compile(masked, "<cell>", "exec")
    assert masker.unmask(masked) == source


@pytest.mark.parametrize(
    "source",
    [
        "print('what?')  # why?\n",
        "s = '''\n%not magic\n!neither\nwhat?\n'''\n",
        "x = (1 +\n     2)\n",
        "d = {'a': 1}  # %comment\n",
        "y = a if b else c\n",
        "z = 5 % 3\n",
        "ok = a != b\n",
    ],
)
def test_python_lines_are_not_masked(source):
    assert Masker().mask(source) == source


@pytest.mark.parametrize("magic", ["%%bash", "%%writefile x.py", "%%html", "%%sh", "%%script bash", "%%javascript"])
def test_non_python_cell_magic_skips_the_cell(magic):
    assert Masker().mask(f"{magic}\nDataLoader( $x\n") is None


@pytest.mark.parametrize("magic", ["%%time", "%%timeit -n 3", "%%capture out", "%%prun"])
def test_python_cell_magic_keeps_the_body(magic):
    masked = Masker().mask(f"{magic}\nloader = DataLoader(ds)\n")
    assert masked is not None and masked.endswith("loader = DataLoader(ds)\n")


def test_top_level_await_and_async_for_parse(tmp_path):
    cells = [new_code_cell("from torch.utils.data import DataLoader\nawait setup()\nasync for x in s:\n    pass\nDataLoader(ds, timeout=1)")]
    result = run_check(write_nb(tmp_path / "nb.ipynb", cells), select={"LL006", "LL900"})
    assert positions(result) == [("LL006", 1, 5, 1)]


# -- LL900: a cell that does not parse --------------------------------------------------


def test_broken_cells_are_ll900_at_their_cell_and_the_rest_is_checked():
    result = run_check(FIXTURES / "syntax_error.ipynb", select={"LL900", "LL002", "LL006"})
    got = positions(result)
    # Cell 3 is indented: alone it does not parse (Jupyter says
    # IndentationError); it must not become the body of cell 2's def.
    assert [(c, cell) for c, cell, _, _ in got] == [("LL900", 3), ("LL900", 4), ("LL002", 5)]
    assert got[1][2] == 2  # the row inside cell 4
    assert all(f.message.startswith("SyntaxError") for f in result.findings[:2])


def test_ll900_deselected_still_excludes_the_broken_cell():
    result = run_check(FIXTURES / "syntax_error.ipynb", select={"LL002", "LL006"})
    assert positions(result) == [("LL002", 5, 1, 6)]


# -- LL901: not a usable notebook -------------------------------------------------------


@pytest.mark.parametrize(
    "name, message, row",
    [
        ("malformed.ipynb", "malformed notebook JSON: Expecting property name enclosed in double quotes", 3),
        ("nbformat3.ipynb", "nbformat 3 notebooks are not supported", 1),
        ("no_cells.ipynb", "not a notebook: it has no `cells` list", 1),
    ],
)
def test_unreadable_notebooks_are_ll901(name, message, row):
    result = run_check(FIXTURES / name)
    assert [f.code for f in result.findings] == ["LL901"]
    assert result.findings[0].message.startswith(message)
    assert result.findings[0].location.row == row
    assert result.findings[0].cell is None
    assert result.error is None


@pytest.mark.parametrize(
    "content, message",
    [
        (b'["DataLoader"]', "not a notebook: the JSON document is not an object"),
        (b'{"cells": "DataLoader", "nbformat": 4}', "not a notebook: `cells` is not a list"),
        (b'{"cells": [], "nbformat": "4", "x": "DataLoader"}', "not a notebook: `nbformat` is '4', not a number"),
        (b'{"cells": [], "nbformat": 2, "x": "DataLoader"}', "nbformat 2 notebooks are not supported"),
        (b'{"cells": ["DataLoader\xff"]}', "cannot read notebook: not UTF-8 (invalid byte 0xff)"),
        (b'{"cells": [' * 100000 + b'"DataLoader"', "malformed notebook JSON"),
        (b"", "malformed notebook JSON: Expecting value"),
    ],
)
def test_odd_documents_never_raise(tmp_path, content, message):
    path = tmp_path / "nb.ipynb"
    path.write_bytes(content)
    result = run_check(path)
    assert result.error is None
    if message is None:
        assert result.findings == []
    else:
        assert [f.code for f in result.findings] == ["LL901"]
        assert result.findings[0].message.startswith(message)


def test_a_bad_cell_is_ll901_at_that_cell_and_the_others_are_checked(tmp_path):
    path = tmp_path / "nb.ipynb"
    doc = {
        "cells": [
            {"cell_type": "code", "source": 42, "metadata": {}, "outputs": []},
            "not a cell",
            {"cell_type": "code", "source": ["from torch.utils.data import DataLoader\n", "DataLoader(ds, timeout=1)"]},
        ],
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
    }
    path.write_text(json.dumps(doc))
    result = run_check(path, select={"LL901", "LL006"})
    assert positions(result) == [("LL901", 1, 1, 1), ("LL901", 2, 1, 1), ("LL006", 3, 2, 1)]


def test_cli_reports_ll901_without_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "loadlint", "check", "--output-format", "concise", str(FIXTURES / "nbformat3.ipynb")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "nbformat3.ipynb:1:1: LL901 nbformat 3 notebooks are not supported" in proc.stdout


# -- fixing ----------------------------------------------------------------------------


ODD_SHAPES = {
    # name: (cells expected to change, extra checks on the new text)
    "course_custom_dataset.ipynb": {5},
    "strings_2space.ipynb": {3},
    "escaped_1space.ipynb": {3, 5},
    "crlf_4space.ipynb": {2},
    "compact.ipynb": {1},
    "magics.ipynb": {2, 7},
}


@pytest.mark.parametrize("name", sorted(ODD_SHAPES))
def test_fix_round_trips_byte_for_byte_outside_edited_sources(tmp_path, name):
    path = tmp_path / name
    shutil.copyfile(FIXTURES / name, path)
    before = path.read_bytes()
    result = run_fix(path, select=ALL - {"LL201", "LL012"})
    assert result.error is None, result.error
    after = path.read_bytes()
    assert after != before
    assert_only_sources_changed(before, after, ODD_SHAPES[name])
    # Still a valid notebook, and the fix is complete and idempotent.
    nbformat.validate(nbformat.reads(after.decode("utf-8"), as_version=4))
    again = run_fix(path, select=ALL - {"LL201", "LL012"})
    assert again.fixed is None and path.read_bytes() == after
    assert [f.code for f in again.findings if f.code not in ("LL900",)] == []


def test_fix_keeps_string_sources_and_the_missing_trailing_newline(tmp_path):
    path = tmp_path / "nb.ipynb"
    shutil.copyfile(FIXTURES / "strings_2space.ipynb", path)
    run_fix(path, select={"LL001"})
    text = path.read_text(encoding="utf-8")
    assert not text.endswith("\n")
    doc = json.loads(text)
    assert doc["cells"][2]["source"] == (
        "loader = DataLoader(ds, batch_size=4)  # a comment\nfor (x,) in loader:\n    print(x.shape)"
    )
    assert list(doc["cells"][0]) == ["source", "cell_type", "metadata", "outputs", "execution_count"]


def test_fix_keeps_ascii_escaping(tmp_path):
    path = tmp_path / "nb.ipynb"
    shutil.copyfile(FIXTURES / "escaped_1space.ipynb", path)
    run_fix(path, select={"LL002", "LL006"})
    raw = path.read_bytes()
    assert raw.isascii()
    assert b'"source": "# \\u00e9tape 2 : le chargeur\\nloader = DataLoader(ds, batch_size=4)  # fran\\u00e7ais\\n"' in raw
    assert b'    "val = DataLoader(ds)"\n' in raw


def test_fix_keeps_raw_utf8_and_crlf(tmp_path):
    path = tmp_path / "nb.ipynb"
    shutil.copyfile(FIXTURES / "crlf_4space.ipynb", path)
    run_fix(path, select={"LL001"})
    raw = path.read_bytes()
    assert "préchargement".encode() in raw and b"\\u00e9" not in raw
    assert raw.count(b"\n") == raw.count(b"\r\n")
    assert b'            "loader = DataLoader(ds, batch_size=4)  # pr\xc3\xa9chargement"\r\n' in raw


def test_fix_preserves_magics(tmp_path):
    path = tmp_path / "nb.ipynb"
    shutil.copyfile(FIXTURES / "magics.ipynb", path)
    run_fix(path, select={"LL001", "LL006"})
    sources = cell_sources(path)
    assert sources[2] == "%%time\nloader = DataLoader(ds, batch_size=4)"
    assert sources[7] == "%pip install \\\n    numpy\nloader2 = DataLoader(ds)"
    assert sources[1] == cell_sources(FIXTURES / "magics.ipynb")[1]


def test_fix_that_inserts_lines_keeps_them_in_their_cell(tmp_path):
    cells = [
        new_code_cell("from torch.utils.data import DataLoader\nfrom torch.utils.data.distributed import DistributedSampler"),
        new_code_cell("sampler = DistributedSampler(ds)\nloader = DataLoader(ds, batch_size=4, sampler=sampler)"),
        new_markdown_cell("Train:"),
        new_code_cell("for epoch in range(3):\n    for batch in loader:\n        step(batch)"),
        new_code_cell("print('done')"),
    ]
    path = write_nb(tmp_path / "nb.ipynb", cells)
    before = path.read_bytes()
    result = run_fix(path, select={"LL102"})
    assert result.applied == {"LL102": 1}
    sources = cell_sources(path)
    assert sources[4] == "for epoch in range(3):\n    sampler.set_epoch(epoch)\n    for batch in loader:\n        step(batch)"
    assert sources[5] == "print('done')"
    assert_only_sources_changed(before, path.read_bytes(), {4})


@pytest.mark.parametrize("indent", [None, 1, 2, 4])
def test_nbformat_written_notebooks_round_trip(tmp_path, indent):
    cells = [
        new_markdown_cell("# Título"),
        new_code_cell("import torch\nfrom torch.utils.data import DataLoader", execution_count=1),
        new_code_cell(
            "loader = DataLoader(ds, batch_size=4, prefetch_factor=2)\nfor b in loader:\n    pass",
            execution_count=2,
            outputs=[new_output("stream", name="stdout", text="héllo\n" * 3)],
        ),
    ]
    nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    path = tmp_path / "nb.ipynb"
    text = json.dumps(nb, indent=indent, sort_keys=True, ensure_ascii=indent == 2) + ("\n" if indent else "")
    path.write_text(text, encoding="utf-8")
    before = path.read_bytes()
    run_fix(path, select={"LL001"})
    after = path.read_bytes()
    assert_only_sources_changed(before, after, {3})
    assert cell_sources(path)[3].startswith("loader = DataLoader(ds, batch_size=4)\n")
    nbformat.validate(nbformat.reads(after.decode(), as_version=4))


def test_fix_source_list_that_was_empty_or_single_line(tmp_path):
    path = tmp_path / "nb.ipynb"
    shutil.copyfile(FIXTURES / "escaped_1space.ipynb", path)
    run_fix(path, select={"LL006"})
    doc = json.loads(path.read_text())
    assert doc["cells"][4]["source"] == ["val = DataLoader(ds)"]


def test_diff_is_per_cell_and_writes_nothing(tmp_path):
    path = tmp_path / "course.ipynb"
    shutil.copyfile(FIXTURES / "course_custom_dataset.ipynb", path)
    before = path.read_bytes()
    proc = subprocess.run(
        [sys.executable, "-m", "loadlint", "fix", "--diff", "--select", "LL001", str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stderr
    assert path.read_bytes() == before
    assert proc.stdout.splitlines()[:2] == [f"--- a/{path}:cell 5", f"+++ b/{path}:cell 5"]
    assert "-val_loader = DataLoader(ds, batch_size=16, prefetch_factor=4)" in proc.stdout
    assert "+val_loader = DataLoader(ds, batch_size=16)" in proc.stdout
    assert "Would fix 1 problem." in proc.stderr


def test_dry_run_result_carries_the_new_text(tmp_path):
    path = tmp_path / "nb.ipynb"
    shutil.copyfile(FIXTURES / "compact.ipynb", path)
    before = path.read_bytes()
    result = run_fix(path, select={"LL001"}, dry_run=True)
    assert path.read_bytes() == before
    assert result.fixed is not None and json.loads(result.fixed)["cells"][0]["source"][1] == "loader = DataLoader(ds, batch_size=4)"
    assert result.cell_changes and result.cell_changes[0][0] == 1


def test_fix_refuses_a_file_changed_meanwhile(tmp_path, monkeypatch):
    path = tmp_path / "nb.ipynb"
    shutil.copyfile(FIXTURES / "compact.ipynb", path)
    data = path.read_bytes()
    path.write_bytes(data + b" ")
    result = check(path, data, options({"LL001"}), FixRequest())
    assert result.error and "changed on disk" in result.error
    assert path.read_bytes() == data + b" "


def test_fix_does_not_touch_a_read_only_notebook(tmp_path):
    path = tmp_path / "nb.ipynb"
    shutil.copyfile(FIXTURES / "compact.ipynb", path)
    before = path.read_bytes()
    os.chmod(path, 0o444)
    try:
        result = run_fix(path, select={"LL001"})
    finally:
        os.chmod(path, 0o644)
    if os.geteuid() != 0:
        assert result.error and "cannot write" in result.error
    else:
        assert result.error is None or "cannot write" in result.error
    if result.error:
        assert path.read_bytes() == before


# -- the command line and discovery ----------------------------------------------------


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "loadlint", *args], capture_output=True, text=True, cwd=cwd)


def test_cli_full_output_shows_the_cell_line(tmp_path):
    shutil.copyfile(FIXTURES / "course_custom_dataset.ipynb", tmp_path / "course.ipynb")
    proc = cli("check", "--select", "LL001", "course.ipynb", cwd=tmp_path)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("course.ipynb:cell 5:3:14: LL001 [*] `prefetch_factor=4` without `num_workers`")
    assert lines[2] == "3 | val_loader = DataLoader(ds, batch_size=16, prefetch_factor=4)"


def test_cli_json_carries_the_cell(tmp_path):
    shutil.copyfile(FIXTURES / "course_custom_dataset.ipynb", tmp_path / "course.ipynb")
    (tmp_path / "train.py").write_text("from torch.utils.data import DataLoader\nDataLoader(ds, timeout=1)\n")
    proc = cli("check", "--select", "LL001,LL006", "--output-format", "json", ".", cwd=tmp_path)
    data = json.loads(proc.stdout)
    assert [(d["filename"], d["cell"], d["location"]["row"]) for d in data] == [("course.ipynb", 5, 3), ("train.py", None, 2)]


def test_folders_include_notebooks_unless_the_extension_is_dropped(tmp_path):
    shutil.copyfile(FIXTURES / "compact.ipynb", tmp_path / "nb.ipynb")
    assert "nb.ipynb:cell 1:2:10: LL001" in cli("check", "--select", "LL001", "--output-format", "concise", ".", cwd=tmp_path).stdout
    (tmp_path / "loadlint.toml").write_text('extension = ["py"]\n')
    proc = cli("check", "--select", "LL001", ".", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == ""
    assert proc.stderr == "loadlint: warning: No Python files found under the given path(s)\n"


def test_cli_fix_writes_the_notebook(tmp_path):
    shutil.copyfile(FIXTURES / "course_custom_dataset.ipynb", tmp_path / "course.ipynb")
    before = (tmp_path / "course.ipynb").read_bytes()
    proc = cli("fix", "--select", "LL001", "course.ipynb", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Found 1 problem (1 fixed, 0 remaining)." in proc.stdout
    assert_only_sources_changed(before, (tmp_path / "course.ipynb").read_bytes(), {5})


# -- size -----------------------------------------------------------------------------------


def big_notebook(path: Path, megabytes: int = 5) -> Path:
    """A notebook of about ``megabytes`` MB, almost all of it outputs: long
    training logs and embedded PNGs, as executed course notebooks have."""
    import base64

    png = base64.b64encode(os.urandom(300_000)).decode()
    log = "".join(f"epoch {i}: loss=0.{i:06d} acc=0.{i:04d}\n" for i in range(4000))
    cells = [new_code_cell("import torch\nfrom torch.utils.data import DataLoader, Dataset")]
    i = 0
    while sum(len(png) + len(log) for _ in range(i)) < megabytes * 1_000_000:
        cells.append(new_markdown_cell(f"## Step {i}"))
        cells.append(
            new_code_cell(
                f"loader_{i} = DataLoader(ds, batch_size=32, shuffle=True, prefetch_factor=2)\nfor b in loader_{i}:\n    pass",
                execution_count=i + 2,
                outputs=[
                    new_output("stream", name="stdout", text=log),
                    new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"}),
                ],
            )
        )
        i += 1
    return write_nb(path, cells)


def test_a_5mb_notebook_checks_and_fixes_quickly(tmp_path):
    path = big_notebook(tmp_path / "big.ipynb")
    size = path.stat().st_size
    assert size > 5_000_000
    started = time.perf_counter()
    result = run_check(path, select={"LL001"})
    elapsed = time.perf_counter() - started
    loaders = sum(1 for s in cell_sources(path).values() if s.startswith("loader_"))
    assert loaders >= 5 and [f.code for f in result.findings] == ["LL001"] * loaders
    assert elapsed < 5, elapsed
    before = path.read_bytes()
    started = time.perf_counter()
    result = run_fix(path, select={"LL001"})
    assert result.error is None
    assert time.perf_counter() - started < 10
    after = path.read_bytes()
    changed = {i for i, s in cell_sources(path).items() if "loader_" in s}
    assert_only_sources_changed(before, after, changed)


# -- notebook rules in fix mode ------------------------------------------------------------


def test_fix_mode_sees_the_notebook_rules(tmp_path):
    cells = [
        new_code_cell("from torch.utils.data import DataLoader, Dataset\nclass Faces(Dataset):\n    pass"),
        new_code_cell("loader = DataLoader(Faces(), num_workers=2, timeout=0)\nfor b in loader:\n    pass"),
    ]
    path = write_nb(tmp_path / "nb.ipynb", cells)
    checked = run_check(path, profile=PORTABLE, select={"LL012", "LL013"})
    fixed = run_fix(path, profile=PORTABLE, select={"LL012", "LL013"})
    # LL012 is a notebook's finding, LL013 a script's: the same in both modes.
    assert positions(checked) == positions(fixed) == [("LL012", 2, 1, 10)]


def test_turning_workers_on_over_notebook_code_is_withheld(tmp_path):
    path = FIXTURES / "course_custom_dataset.ipynb"
    result = run_check(path, profile=PORTABLE, select={"LL201"})
    [finding] = result.findings
    # Spawned workers could not import the notebook's class: withheld, and the finding says why.
    assert finding.fix is None
    assert finding.fix_withheld == (
        "no fix: `FaceDataset` defined in the notebook cannot be imported by workers started with spawn or "
        "forkserver (no target platform is declared, and macOS and Windows spawn workers); move the definitions "
        "to a `.py` module and import them first (LL012)"
    )
    copy = tmp_path / "course.ipynb"
    shutil.copyfile(path, copy)
    before = copy.read_bytes()
    result = run_fix(copy, profile=PORTABLE, select={"LL001", "LL201", "LL012"})
    assert result.error is None and result.applied == {"LL001": 1}
    assert_only_sources_changed(before, copy.read_bytes(), {5})
    # Not even --unsafe-fixes applies it: the notebook stays as it is.
    before = copy.read_bytes()
    result = run_fix(copy, profile=PORTABLE, select={"LL201", "LL012"}, unsafe=True)
    assert result.error is None and result.applied == {}
    assert copy.read_bytes() == before
    [finding] = [f for f in result.findings if f.code == "LL201"]
    assert finding.fix is None and "`FaceDataset` defined in the notebook cannot be imported" in finding.fix_withheld
