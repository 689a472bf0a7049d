from __future__ import annotations

from typing import Iterator

from loadlint.rules.base import Context, Report, Rule


class SyntaxErrorRule(Rule):
    """
    ## What it does
    Reports a file that calls `DataLoader(` (or imports it under another
    name) but cannot be parsed, and files too deeply nested or too large
    to analyse.  The message, line and column are those of the
    `SyntaxError` Python itself raises for the file (in a notebook, for the
    cell), so that the finding points where running the code would; when
    Python accepts what the parser rejects (syntax newer than the parser
    knows), the parser's own position and message are given.

    A module over 200,000 characters is not parsed whole: loadlint parses
    its top-level statements that can matter (those mentioning `DataLoader`,
    imports, loops, calls, main guards, anything that is not a plain
    assignment or a definition, and every statement sharing a name with one
    of these) and reports findings at their rows in the whole file: the
    findings a full parse gives.  The other statements are still checked
    with Python's own parser, so a syntax error among them is reported too.
    When the statements that can matter hold more than 1,000,000 characters
    (ten seconds or more of parsing), the file is reported at line 1:

    ```text
    LL900 file too large to analyse: 12,000,000 characters, 2,500,000 of them in statements that can reach a DataLoader (at most 1,000,000 are parsed); split the module or exclude it
    ```

    Split the module, or exclude it (`extend-exclude`) when it is generated.

    Whatever a file holds, its analysis on the command line is bounded in
    time: one that runs past 60 seconds is abandoned and reported instead
    of hanging the run:

    ```text
    LL900 analysis did not finish within 60 s; split the module or exclude it
    ```

    ## Why is this bad?
    A file that does not parse cannot be checked: its DataLoader calls could
    hide any of the other findings.  loadlint reports it instead of skipping
    it silently, and goes on with the other files (exit code 1, as for any
    finding).  Files that never call `DataLoader(` are not parsed at all
    (that is what keeps loadlint fast: checking their syntax would cost
    0.4x the parse of the files that are parsed), so their syntax errors
    are left to your other tools; that such a file cannot be read at all
    (a NUL byte, undecodable bytes, an empty or broken notebook) is still
    reported, as LL901.

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
    category = "syntax"
    summary = "a file that may build a DataLoader does not parse (or is too deeply nested to analyse)"

    def check(self, ctx: Context) -> Iterator[Report]:
        # Reported by the engine before any rule runs.
        return iter(())
