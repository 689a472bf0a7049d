"""A bound on one file's analysis: past it the file is reported, not
waited for, whatever the input makes the analysis do."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator


class OutOfTime(Exception):
    pass


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ``OutOfTime`` in this thread after ``seconds`` (where a timer
    signal can be had: the main thread of a Unix process; elsewhere no bound)."""
    import signal
    import threading

    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise OutOfTime

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
