"""LL900 (syntax-error): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=32)
    """),
]
INVALID = [
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=32
        """,
        message="SyntaxError: '(' was never closed",
        line=2,
    ),
    # Where Python reports it, not where the parser gave up (line 3).
    Invalid(
        """
        from torch.utils.data import DataLoader
        def broken(:
            DataLoader(ds)
        """,
        message="SyntaxError: invalid syntax",
        line=2,
    ),
]
