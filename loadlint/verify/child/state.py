"""What one child process knows: the parent's spec, the loaders the script
built, the target among them, notes for the report and the heartbeat."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any


class StopScript(BaseException):
    """Ends the user's script once verify has what it needs. A
    BaseException, so that ``except Exception`` in the script cannot keep
    the script running."""


class State:
    """Shared by capture and the mode that runs after it; one per process."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.records: list[dict[str, Any]] = []
        self.objects: list[dict[str, Any]] = []  # bound arguments, same index
        self.target: int | None = None
        self.target_instance: Any = None
        self.stop_on_capture = True
        self.stopped = False
        self.depth = threading.local()
        self.notes: list[str] = []
        self.progress_path: str | None = spec.get("progress")
        self.original_init: Any = None
        #: Shown by the parent's progress line: runs done, and the end of
        #: the measuring budget (``time.perf_counter``) once it is known.
        self.runs = 0
        self.deadline: float | None = None
        self.budget_s: float | None = None
        self._last: tuple[str, dict[str, Any]] = ("script", {})

    def progress(self, phase: str, **detail: Any) -> None:
        """Heartbeat: the parent treats a stale progress file as a hang and
        shows the phase, candidate, runs done and budget left."""
        self._last = (phase, detail)
        if not self.progress_path:
            return
        detail = dict(detail, runs=self.runs)
        if self.deadline is not None:
            detail.update(left_s=max(0.0, self.deadline - time.perf_counter()),
                          budget_s=self.budget_s)
        # Ranks share the file: a private temporary name per process, and a
        # failed heartbeat must never surface inside the user's loop.
        tmp = f"{self.progress_path}.{os.getpid()}.tmp"
        try:
            with open(tmp, "w") as fh:
                json.dump({"phase": phase, "t": time.time(), **detail}, fh)
            os.replace(tmp, self.progress_path)
        except OSError:
            pass

    def beat(self, **detail: Any) -> None:
        """The last phase again, with ``detail`` added (inside a long run)."""
        phase, last = self._last
        self.progress(phase, **dict(last, **detail))
