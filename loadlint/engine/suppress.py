"""What ``# noqa`` comments suppress: a line's codes, a file's codes.  Read
by the engine and by the project's reporter; plain text, no parse."""

from __future__ import annotations

import re

from loadlint.types import Finding

# A code is letters, a digit, then letters or digits: ``LL2O1`` (a letter O)
# is read as one invalid code, so the list goes on past it, as ruff reads it
# (LL902 reports it); ``# noqa: LL201 see #12`` ends the list at ``see``.
_ONE = r"[A-Za-z]+[0-9][A-Za-z0-9]*"
CODE_LIST = rf"{_ONE}(?:(?:(?:[ \t]*,)+[ \t]*|[ \t]+){_ONE})*"
NOQA = re.compile(rf"#\s*noqa(?::[ \t]*(?P<codes>{CODE_LIST}))?", re.IGNORECASE)
_FILE_NOQA = re.compile(
    rf"^[ \t]*#\s*loadlint:\s*noqa(?::[ \t]*(?P<codes>{CODE_LIST}))?\s*$",
    re.IGNORECASE | re.MULTILINE,
)
_CODE = re.compile(_ONE)


def suppressed_codes(line: str) -> set[str] | None:
    """Codes a ``# noqa`` comment on this line suppresses; {"*"} for a bare one."""
    if "#" not in line:
        return None
    match = NOQA.search(line)
    if match is None:
        return None
    codes = match.group("codes")
    return {"*"} if not codes else {c.upper() for c in _CODE.findall(codes)}


def file_suppressions(text: str) -> set[str]:
    """Codes a ``# loadlint: noqa`` line suppresses for the whole file; {"*"} for all."""
    out: set[str] = set()
    if "loadlint" not in text:
        return out
    for match in _FILE_NOQA.finditer(text):
        codes = match.group("codes")
        out |= {"*"} if not codes else {c.upper() for c in _CODE.findall(codes)}
    return out


def is_suppressed(finding: Finding, line: str, file_level: set[str]) -> bool:
    if "*" in file_level or finding.code in file_level:
        return True
    codes = suppressed_codes(line)
    return codes is not None and ("*" in codes or finding.code in codes)
