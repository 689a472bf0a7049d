"""``loadlint monitor``: watch the real training run, report where its
DataLoader holds it back, and tune the loader while it trains.

Like :mod:`loadlint.verify`, it runs the user's code and may import torch;
the static core never imports it.  ``watch(loader)`` is the entry point for
code that owns its loop (see :mod:`loadlint.monitor.watch`).
"""

from __future__ import annotations

from typing import Any


def watch(loader: Any) -> Any:
    """A monitored view of ``loader`` (see :func:`loadlint.monitor.watch.watch`)."""
    from loadlint.monitor.watch import watch as watched

    return watched(loader)
