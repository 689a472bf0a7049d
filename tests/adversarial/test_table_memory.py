"""A huge literal table beside a loader whose finding has a fix: deciding
whether to offer the fix, and ``--add-noqa``, cost little memory (each
compiled or tokenized the whole table: 1 MB took 720 MB and 15 MB over
4 GB), with the findings and the file written as before."""

from __future__ import annotations

import json

import pytest

from loadlint.cst import rows, slicing
from loadlint.engine import decision
from tests.adversarial.peak import peak_run

LOADER = "from torch.utils.data import DataLoader\n\n\ndef make(ds):\n    return DataLoader(ds, batch_size=8, prefetch_factor=2)\n"
TABLE = "TABLE = [" + "1," * 500_000 + "]\n" + LOADER
def test_check_of_a_table_beside_a_fixable_loader(tmp_path):
    (tmp_path / "table.py").write_text(TABLE)
    proc, peak = peak_run(tmp_path, "check", "--no-cache", "--target", "cpus=4,gpus=1", "--output-format", "json", "table.py")
    assert proc.returncode == 1, proc.stderr.decode()[-2000:]
    found = [(f["code"], f["location"]["row"], f["location"]["column"], f["fix"] is not None) for f in json.loads(proc.stdout)]
    assert found == [("LL001", 6, 12, True), ("LL201", 6, 12, True)]
    assert peak < 300, f"{peak} MiB"


def test_add_noqa_on_a_table(tmp_path):
    (tmp_path / "table.py").write_text(TABLE)
    proc, peak = peak_run(tmp_path, "check", "--no-cache", "--target", "cpus=4,gpus=1", "--add-noqa", "table.py")
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert (tmp_path / "table.py").read_text() == TABLE.replace("prefetch_factor=2)\n", "prefetch_factor=2)  # noqa: LL001, LL201\n")
    assert peak < 300, f"{peak} MiB"


#: Just above the size where modules are sliced: compiled whole, for comparison, at little cost.
SMALL = "TABLE = [" + "1," * 110_000 + "]\n" + LOADER


@pytest.mark.parametrize("text", [
    SMALL,
    SMALL.replace("1,1,]", "1,,1]"),
    SMALL.replace("TABLE = [", "TABLE = [await x, "),
    SMALL.replace("TABLE = [", "TABLE = [(yield), "),
    SMALL.replace("]\n", "]\nx = 1 <> 2\n"),
    "from __future__ import barry_as_FLUFL\n" + SMALL.replace("]\n", "]\nx = 1 <> 2\n"),
    "from __future__ import barry_as_FLUFL\n" + SMALL.replace("]\n", "]\nx = 1 != 2\n"),
], ids=["valid", "double-comma", "await", "yield", "diamond", "flufl", "not-flufl"])
def test_whether_a_big_text_compiles_is_as_python_says(text):
    assert len(text) > slicing.SLICE_ABOVE
    rows.python_tree.cache_clear()
    whole = rows.python_tree(text)[1]
    rows.python_tree.cache_clear()
    assert decision.compiles(text, "t.py") is whole


def test_add_noqa_keeps_no_token_of_the_table():
    import tracemalloc

    from loadlint.engine.noqa import add_noqa

    table = "TABLE = [" + "1," * 50_000 + "]\n" + LOADER
    tracemalloc.start()
    try:
        text, added, refused = add_noqa(table, {6: {"LL001"}})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (added, refused) == (1, [])
    assert text == table.replace("prefetch_factor=2)\n", "prefetch_factor=2)  # noqa: LL001\n")
    # The text and its lines, a few times over: each token kept cost 100 bytes more.
    assert peak < 20 * len(table), f"{peak / 1e6:.1f} MB"
