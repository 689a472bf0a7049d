"""What ``# noqa`` comments suppress: a line's codes, a file's codes.  Read
by the engine and by the project's reporter; plain text, no parse."""

from __future__ import annotations

import re

from loadlint.types import Finding

_NOQA = re.compile(r"#\s*noqa(?::[ \t]*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?", re.IGNORECASE)
_FILE_NOQA = re.compile(
    r"^[ \t]*#\s*loadlint:\s*noqa(?::[ \t]*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?\s*$",
    re.IGNORECASE | re.MULTILINE,
)
_CODE = re.compile(r"[A-Za-z]+[0-9]+")


def suppressed_codes(line: str) -> set[str] | None:
    """Codes a ``# noqa`` comment on this line suppresses; {"*"} for a bare one."""
    if "#" not in line:
        return None
    match = _NOQA.search(line)
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
