"""LL902 (unused-noqa): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4)  # noqa: E501
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4)  # noqa
    """),
]
INVALID = [
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4)  # noqa: LL2O1
        """,
        message="`# noqa` suppresses nothing with `LL2O1`: `LL2O1` is no loadlint rule code (did you mean "
        "`LL201`?); remove it",
        fixed="""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4)
        """,
        line=2,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4)  # type: ignore  # noqa: E501, LL999
        """,
        message="`# noqa` suppresses nothing with `LL999`: `LL999` is no loadlint rule code; remove it",
        fixed="""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4)  # type: ignore  # noqa: E501
        """,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4)  # noqa: E501, LL2O1 (a long line)
        """,
        fixed="""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4)  # noqa: E501 (a long line)
        """,
    ),
]
