from __future__ import annotations

from typing import Iterator

from loadlint.rules.base import Context, Invalid, Report, Rule, Valid


class SyntaxErrorRule(Rule):
    """
    ## What it does
    Reports a file that calls `DataLoader(` (or imports it under another
    name) but cannot be parsed, and files too deeply nested to analyse.
    The message, line and column are those of the `SyntaxError` Python
    itself raises for the file (in a notebook, for the cell), so that the
    finding points where running the code would; when Python accepts what
    the parser rejects (syntax newer than the parser knows), the parser's
    own position and message are given.

    ## Why is this bad?
    A file that does not parse cannot be checked: its DataLoader calls could
    hide any of the other findings.  loadlint reports it instead of skipping
    it silently, and goes on with the other files (exit code 1, as for any
    finding).  Files that never call `DataLoader(` are not parsed at all
    (that is what keeps loadlint fast), so their syntax errors are left to
    your other tools.

    ## Example
    ```python
    loader = DataLoader(ds, batch_size=32
    ```

    Use instead:
    ```python
    loader = DataLoader(ds, batch_size=32)
    ```

    ## Fix safety
    There is no fix.

    ## References
    - [Python grammar](https://docs.python.org/3/reference/grammar.html)
    """

    code = "LL900"
    name = "syntax-error"
    summary = "the file does not parse (or is too deeply nested to analyse)"

    def check(self, ctx: Context) -> Iterator[Report]:
        # Reported by the engine before any rule runs.
        return iter(())

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
