"""Suite-wide markers: every test that needs torch is also ``slow``.

torch's import alone takes seconds and most torch tests start subprocesses
(DataLoader workers, ``loadlint verify`` runs that time real loaders), so the
default run leaves them out; ``python -m pytest -m slow`` runs them.
"""

from __future__ import annotations

import pytest

# Fixtures are code loadlint reads, never tests to run: a project fixture may
# hold its own tests/test_*.py (a real test beside the module it calls).
collect_ignore_glob = ["fixtures/*"]


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects anything
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("torch") is not None and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
