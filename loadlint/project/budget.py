"""What the project phase may spend on one project.

A factory called with N distinct literal values was analysed again per
value: 1,000 call sites took 224 s, and the language server, which runs the
phase on every save, heard nothing meanwhile.  The phase now stops:

* after ``MAX_VALUE_SETS`` distinct sets of values per factory (the calls
  beyond them are not checked);
* after ``PROJECT_TIME_LIMIT`` seconds (the per-file bound's value), checked
  before each loader and each analysis again;
* at once when ``STOP`` is set (the language server's shutdown).

Where it stopped short, the factory's file gets LL900 saying what was left
undone, and the project's findings are not cached: the next run tries again.
"""

from __future__ import annotations

import threading
import time

from loadlint.types import Location

#: Seconds one project's phase may take (what a file's analysis may).
PROJECT_TIME_LIMIT = 60.0
#: Distinct sets of values one factory is analysed again with, at most.
MAX_VALUE_SETS = 32
#: Set to stop every project phase at its next step (a server shutting down).
STOP = threading.Event()


class Budget:
    """One project phase's time, and the value sets it analysed per factory."""

    def __init__(self) -> None:
        self.deadline = time.monotonic() + PROJECT_TIME_LIMIT
        self.sets: dict[tuple[str, str], int] = {}
        #: Path -> (why, where) of the first work left undone there.
        self.undone: dict[str, tuple[str, Location, Location]] = {}

    def spent(self) -> bool:
        return STOP.is_set() or time.monotonic() > self.deadline

    def stopped(self) -> str:
        return f"stopped after {PROJECT_TIME_LIMIT:g} s"

    def refusal(self, path: str, function: str) -> str | None:
        """Why ``function`` of ``path`` may not be analysed with one more set
        of values (None: it may, and it is counted)."""
        if self.spent():
            return self.stopped()
        count = self.sets.get((path, function), 0)
        if count >= MAX_VALUE_SETS:
            return f"`{function}` is called with more than {MAX_VALUE_SETS} distinct sets of values; the others were not checked"
        self.sets[(path, function)] = count + 1
        return None

    def skip(self, path: str, why: str, span: tuple[Location, Location] | None) -> None:
        if span is not None:
            self.undone.setdefault(path, (why, *span))


def unfinished_message(why: str) -> str:
    return f"project analysis did not finish: {why} (findings of calls from other files may be missing)"
