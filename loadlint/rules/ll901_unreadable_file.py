from __future__ import annotations

from typing import Iterator

from loadlint.rules.base import Context, Report, Rule


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
