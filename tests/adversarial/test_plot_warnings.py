"""``trace --plot`` with hostile trace strings: matplotlib's warnings (a
glyph missing from its font) never reach stderr raw, with its own paths and
the trace's escapes; what is worth saying is one escaped line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

OSC = "\x1b]52;c;aGk=\x07"


def _trace(path: Path, device: str) -> None:
    def x(name: str, ts: float, dur: float, cat: str = "user_annotation", pid: int = 100, tid: int = 100) -> dict:
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": {}}

    events = []
    for i in range(6):
        t = 1_000_000.0 + i * 10_000
        events += [x(f"ProfilerStep#{i}", t, 10_000), x("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t + 10, 6000),
                   x("volta_sgemm_128x64_nn", t + 9100, 800, cat="kernel", pid=0, tid=7)]
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": device}], "traceEvents": events}))


def _plot(tmp_path: Path, device: str) -> list[str]:
    pytest.importorskip("matplotlib")
    (tmp_path / ".git").mkdir()
    _trace(tmp_path / "t.json", device)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOADLINT_")}
    env.update(MPLBACKEND="Agg", NO_COLOR="1")
    proc = subprocess.run([sys.executable, "-m", "loadlint", "trace", "--plot", "p.png", "t.json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1, proc.stderr
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return proc.stderr.splitlines()


def test_escapes_in_a_device_name_are_drawn_escaped_and_warn_of_nothing(tmp_path):
    assert _plot(tmp_path, f"GPU {OSC}\u202e") == ["loadlint: wrote p.png"]


def test_a_missing_glyph_is_one_escaped_line(tmp_path):
    assert _plot(tmp_path, f"GPU \u4e2d{OSC}") == [
        "loadlint: warning: --plot: Glyph 20013 (\\N{CJK UNIFIED IDEOGRAPH-4E2D}) missing from font(s) DejaVu Sans.",
        "loadlint: wrote p.png",
    ]
