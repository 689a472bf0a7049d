from __future__ import annotations

from typing import Iterator

from loadlint.rules.base import Context, Report, Rule


class UnusedNoqa(Rule):
    """
    ## What it does
    Checks for `# noqa:` comments naming loadlint codes that suppress
    nothing: a code that is no loadlint rule (`LL2O1`, with the letter O; a
    retired or mistyped code), or a rule's code on a line where that rule
    reports nothing.  Codes of other tools (`E501`, `F401`) are left alone,
    and so is a bare `# noqa`.

    A code is called unused only when its rule ran: it is selected, and it is
    not one of the rules the project analysis also reports (LL013, LL014,
    LL102, LL202, LL204, LL205, LL207), whose findings may come from the join
    across files.

    ## Why is this bad?
    A mistyped code suppresses nothing and says it does: the finding it was
    meant to silence is still reported, or worse, the reader believes a
    problem was looked at.  A code that is no longer needed (the code was
    fixed) hides the next real finding of that rule on the line.  This is
    ruff's `RUF100` and mypy's `warn_unused_ignores`.

    ## Example
    ```python
    loader = DataLoader(ds, num_workers=4)  # noqa: LL2O1
    ```

    Use instead:
    ```python
    loader = DataLoader(ds, num_workers=4)
    ```

    ## Fix safety
    The fix removes the codes from the comment, and the comment when no
    code is left (a bare `# noqa` would suppress every rule).  It is safe:
    the codes it removes suppress nothing.

    ## References
    - [ruff: unused-noqa (RUF100)](https://docs.astral.sh/ruff/rules/unused-noqa/)
    - [mypy: `warn_unused_ignores`](https://mypy.readthedocs.io/en/stable/config_file.html#confval-warn_unused_ignores)
    """

    code = "LL902"
    name = "unused-noqa"
    category = "noqa"
    summary = "a `# noqa` code that suppresses nothing (unknown, or no finding on its line)"
    fix_availability = "always"

    def check(self, ctx: Context) -> Iterator[Report]:
        # Judged by the engine once every rule has run (loadlint.engine.noqa).
        return iter(())
