from __future__ import annotations

from typing import Iterator

from loadlint.rules.base import Context, Invalid, Report, Rule, Valid


class UnreadableFile(Rule):
    """
    ## What it does
    Reports a file that cannot be read or decoded: a permission error, bytes
    that are not valid in the file's encoding (UTF-8, or the PEP 263 coding
    line's), a NUL byte, a UTF-16 file, a malformed notebook (an empty
    file, or text that is not JSON).  Unlike LL900, it is reported for
    every file, whether or not it calls `DataLoader(`: telling costs a
    decode (about 1 ms a MB), not a parse.

    ## Why is this bad?
    Python itself would refuse to import the file, and loadlint cannot check
    the DataLoader calls in it.  The finding gives the position of the first
    bad byte where there is one.

    ## Example
    A file saved as Latin-1 without a coding line:
    ```python
    # café  (0xe9 on disk)
    from torch.utils.data import DataLoader
    ```

    Use instead:
    ```python
    # -*- coding: latin-1 -*-
    # café
    from torch.utils.data import DataLoader
    ```

    ## Fix safety
    There is no fix.

    ## References
    - [PEP 263: Defining Python Source Code Encodings](https://peps.python.org/pep-0263/)
    """

    code = "LL901"
    name = "unreadable-file"
    category = "unreadable"
    summary = "the file cannot be read or decoded"

    def check(self, ctx: Context) -> Iterator[Report]:
        # Reported by the engine when reading the file.
        return iter(())

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
