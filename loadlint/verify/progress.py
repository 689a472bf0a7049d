"""The live progress line of a verify run: phase, candidate, runs done and
the measuring budget left, redrawn in place on a terminal.

Shown only when stderr is a terminal and the report is text: never in JSON
output, never when piped, never mixed with the script's own output.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

PHASES = {
    "script": "running the script",
    "captured": "loader captured",
    "equivalence": "checking the data",
    "calibrate": "calibrating",
    "search": "searching",
    "sweep": "sweeping",
    "verdict": "paired rounds",
    "insitu": "in-situ run",
    "ddp": "ranks",
}


def render(event: dict[str, Any]) -> str:
    """One line for a progress event written by the child."""
    parts = [PHASES.get(str(event.get("phase")), str(event.get("phase")))]
    if event.get("candidate"):
        parts.append(str(event["candidate"]))
    if event.get("round"):
        parts.append(f"round {event['round']}")
    if event.get("runs"):
        parts.append(f"{event['runs']} runs done")
    if event.get("left_s") is not None and event.get("budget_s"):
        parts.append(f"{event['left_s']:.0f} s left of {event['budget_s']:.0f} s")
    return "loadlint verify: " + " | ".join(parts)


class ProgressLine:
    """Redraws one line on ``stream``; a no-op unless enabled."""

    def __init__(self, enabled: bool, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.width = 0

    @classmethod
    def for_terminal(cls, output_format: str, show_output: bool) -> "ProgressLine":
        """Enabled for a text report on a terminal, without the script's output."""
        stream = sys.stderr
        tty = hasattr(stream, "isatty") and stream.isatty()
        return cls(tty and output_format == "text" and not show_output, stream)

    def update(self, event: dict[str, Any]) -> None:
        if not self.enabled:
            return
        text = render(event)[:119]
        pad = max(0, self.width - len(text))
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self.width = len(text)

    def clear(self) -> None:
        if self.enabled and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0
