"""Hostile line magics around kept statements: masking never raises, keeps
every line and column, always parses, and gives the source back exactly."""

from __future__ import annotations

import libcst
import pytest

from loadlint.engine.ipython import Masker

HOSTILE = [
    "%time\tf()",  # a tab after the name: not the magic's own spacing, masked
    "%time f()  # %time g()",
    "%time 'pass;' if x else y",
    "%timeit -n 1 -r 1 -n 2 -r 3 -p 4 -t -c -q -o f()",
    "%timeit -n1 f()",
    "%prun -T out.txt -D out.prof -l 10 -s tottime -r -q f()",
    "%time " + "f(" * 200 + ")" * 200,
    "%time lambda: (yield)",
    "%time x = 1; y = 2",
    "%time import os",
    "%time del x",
    "%time return",
    "%time f(x) ?",
    "%time é = f()",
    "%time f()\r",
    "%time a = \\",
    "%%time f()",
    "%timeit",
    "%timeit -n 1",
    "%prun -s -s -s",
    "  %time f()",
    "pass;  f()",
    "pass;f()",
]


@pytest.mark.parametrize("line", HOSTILE)
def test_masking_keeps_lines_parses_and_comes_back(line):
    source = f"import torch\n{line}\nx = 1\n"
    masker = Masker()
    masked = masker.mask(source)
    if masked is None:  # only a ``%%`` first line skips a cell
        return
    assert masked.count("\n") == source.count("\n")
    assert [len(a) for a in masked.split("\n")] == [len(a) for a in source.split("\n")] or "__loadlint_ipython_" in masked
    if not line.startswith(" ") and "__loadlint_ipython_" not in masked:
        libcst.parse_module(masked)  # the parser the cells go through: a kept line never makes an LL900
    assert masker.unmask(masked) == source


def test_many_kept_lines_across_cells_each_get_their_own_magic_back():
    masker = Masker()
    cells = [f"%time a{i} = f()\n%prun -s t{i} b{i} = g()\n" for i in range(50)]
    masked = [masker.mask(cell) for cell in cells]
    assert len(masker.kept) == 100
    # Unmasked one cell at a time, out of order, as a fix does.
    for index in (49, 0, 25):
        text = masked[index]
        assert text is not None
        assert masker.unmask(text, cells[index]) == cells[index]
        edited = text.replace(f"a{index} = f()", f"a{index} = f(1)")
        assert masker.unmask(edited, cells[index]) == cells[index].replace("f()", "f(1)")
