"""The live progress line: what it shows and when it is drawn."""

from __future__ import annotations

import io

from loadlint.verify.progress import ProgressLine, render


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_render_shows_phase_candidate_runs_and_budget():
    line = render({"phase": "verdict", "candidate": "tuned1", "round": 3, "runs": 7,
                   "left_s": 41.6, "budget_s": 90.0})
    assert line == ("loadlint verify: paired rounds | tuned1 | round 3 | 7 runs done | "
                    "42 s left of 90 s")


def test_line_is_redrawn_in_place_and_cleared():
    out = Tty()
    line = ProgressLine(True, out)
    line.update({"phase": "search", "candidate": "nw=4", "runs": 2})
    line.update({"phase": "search", "candidate": "nw=8", "runs": 4})
    line.clear()
    text = out.getvalue()
    assert text.count("\r") == 4 and "nw=8" in text and text.endswith("\r")


def test_disabled_for_json_pipes_and_script_output(monkeypatch):
    monkeypatch.setattr("sys.stderr", Tty())
    assert ProgressLine.for_terminal("text", show_output=False).enabled
    assert not ProgressLine.for_terminal("json", show_output=False).enabled
    assert not ProgressLine.for_terminal("text", show_output=True).enabled
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert not ProgressLine.for_terminal("text", show_output=False).enabled
    silent = io.StringIO()
    ProgressLine(False, silent).update({"phase": "search"})
    assert silent.getvalue() == ""
