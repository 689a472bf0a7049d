"""Progress of a long run on a terminal: one line of stderr, never in
machine-readable output (the caller decides when to draw it)."""

from __future__ import annotations

import time
from typing import TextIO


class Progress:
    """``Checking 12/66 files`` on one line of stderr, redrawn at most ten
    times a second, drawn only once a run has lasted a moment (a quick run
    should not flicker) and erased before the report is printed."""

    DELAY = 0.3

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.total = 0
        self.done = 0
        self.start = time.monotonic()
        self.last = 0.0
        self.drawn = False

    def advance(self) -> None:
        self.done += 1
        now = time.monotonic()
        if now - self.start < self.DELAY or (now - self.last < 0.1 and self.done < self.total):
            return
        self.last = now
        self.stream.write(f"\rChecking {self.done}/{self.total} files")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
