"""LL901 (unreadable-file): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        # café, in UTF-8
        from torch.utils.data import DataLoader
        loader = DataLoader(ds)
    """),
]
# Text that never was a file's bytes (an editor's buffer, a notebook's
# JSON escapes) can hold a lone surrogate.
INVALID = [
    Invalid(
        """
        from torch.utils.data import DataLoader
        name = "\ud800"
        loader = DataLoader(ds)
        """,
        message="cannot read source: U+D800 (a lone surrogate) is not valid Unicode",
        line=2,
    ),
]
