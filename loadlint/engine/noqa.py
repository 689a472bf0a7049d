"""``# noqa`` comments that suppress nothing (LL902): codes that are no
loadlint rule (``LL2O1``, a letter O) and codes with no finding to suppress
on their line, each comment reported once with a fix that removes them.

The engine gives the rows and codes of every finding before suppression.
Only the codes this run can judge are called unused: selected ones, and not
those the project analysis also reports (a ``noqa`` may serve a finding only
the join across files finds).  Other tools' codes (``E501``) are left alone.
"""

from __future__ import annotations

import io
import re
import tokenize
from typing import AbstractSet, Callable, Mapping

import libcst as cst

from loadlint.engine.suppress import CODE_LIST, suppressed_codes
from loadlint.rules import CODES, rule_class
from loadlint.rules.base import FixSpec, Report

__all__ = ["CODE", "add_noqa", "unused_noqa"]

CODE = "LL902"

_DIRECTIVE = re.compile(rf"#\s*noqa:[ \t]*(?P<codes>{CODE_LIST})", re.I)
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def _suggestion(token: str) -> str:
    # The letters O and I typed for the digits 0 and 1.
    guess = token.upper()[:2] + token.upper()[2:].replace("O", "0").replace("I", "1")
    return f" (did you mean `{guess}`?)" if guess in CODES else ""


def unused_noqa(
    module: cst.Module, row_of: Callable[[cst.CSTNode], int], found: AbstractSet[tuple[int, str]],
    select: AbstractSet[str],
) -> list[Report]:
    """One report per end-of-line ``# noqa:`` comment naming loadlint codes
    that suppress nothing; ``found``: (row, code) of every finding before
    suppression."""
    reports = []
    for whitespace in _line_ends(module):
        comment = whitespace.comment
        if comment is None or "noqa" not in comment.value.lower():
            continue
        match = _DIRECTIVE.search(comment.value)
        if match is None:
            continue
        row = row_of(comment)
        tokens = list(_TOKEN.finditer(match.group("codes")))
        invalid, unused, kept = [], [], []
        for token in tokens:
            text = token.group()
            code = text.upper()
            if code.startswith("LL") and code not in CODES:
                invalid.append(text)
            elif code in CODES and code in select and not rule_class(code).across_files and (row, code) not in found:
                unused.append(code)
            else:
                kept.append(text)
        if not invalid and not unused:
            continue
        parts = [f"`{t}` is no loadlint rule code{_suggestion(t)}" for t in invalid]
        parts += [f"no {code} finding starts on this line" for code in unused]
        removed = ", ".join(f"`{t}`" for t in invalid + unused)
        message = f"`# noqa` suppresses nothing with {removed}: {'; '.join(parts)}; remove {'it' if len(invalid + unused) == 1 else 'them'}"
        rewritten = _rewrite(comment.value, match, tokens, kept)
        replace: list[tuple[cst.CSTNode, str]] = [(comment, rewritten)]
        if not rewritten and whitespace.whitespace.value:
            replace.append((whitespace.whitespace, ""))  # no trailing blanks left behind
        fix = FixSpec("safe", f"Remove {removed} from the `# noqa` comment", replace=replace)
        reports.append(Report(comment, message, fix))
    return reports


class _LineEnds(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found: list[cst.TrailingWhitespace] = []

    def visit_TrailingWhitespace(self, node: cst.TrailingWhitespace) -> None:
        if node.comment is not None:
            self.found.append(node)


def _line_ends(module: cst.Module) -> list[cst.TrailingWhitespace]:
    """The end-of-line whitespace that holds a comment, in source order."""
    visitor = _LineEnds()
    module.visit(visitor)
    return visitor.found


def _rewrite(value: str, match: re.Match[str], tokens: list[re.Match[str]], kept: list[str]) -> str:
    """The comment without the removed codes; without the directive when no code is left
    (a bare ``# noqa`` would suppress everything)."""
    if not kept:
        return value[: match.start()].rstrip()
    codes_start = match.start("codes")
    last = tokens[-1].end() + codes_start
    return value[:codes_start] + ", ".join(kept) + value[last:]


def add_noqa(text: str, codes_by_row: Mapping[int, AbstractSet[str]]) -> tuple[str, int, list[int]]:
    """``--add-noqa``: ``text`` with ``# noqa: CODES`` at the end of each
    row given (merged into a ``# noqa:`` already there, whose invalid
    loadlint codes are dropped); the directives
    added or extended, and the rows where no directive would suppress the
    codes.  A row that does not end outside a string (inside a
    triple-quoted string, after a backslash) is refused, and so is every
    row of a text tokenize refuses."""
    ends: dict[int, int] = {}
    comments: dict[int, tokenize.TokenInfo] = {}
    try:
        # Only what the rows need is kept: a table of millions of tokens costs no memory.
        for t in tokenize.generate_tokens(io.StringIO(text).readline):
            if t.type in (tokenize.NEWLINE, tokenize.NL):
                ends[t.start[0]] = t.start[1]
            elif t.type == tokenize.COMMENT:
                comments[t.start[0]] = t
    except (tokenize.TokenError, SyntaxError):
        return text, 0, sorted(codes_by_row)
    lines = text.splitlines(keepends=True)
    added = 0
    refused = []
    for row, codes in sorted(codes_by_row.items()):
        if row not in ends or row > len(lines):
            refused.append(row)
            continue
        line = lines[row - 1]
        body = line.rstrip("\r\n")
        newline = line[len(body):]
        comment = comments.get(row)
        wanted = sorted(codes)
        if comment is not None:
            match = _DIRECTIVE.search(comment.string)
            if match is None and re.search(r"#\s*noqa\b", comment.string, re.I):
                continue  # a bare noqa suppresses everything already
            if match is not None:
                # Invalid loadlint codes (``LL2O1``) suppress nothing: they give way
                # to the codes added, so the next check is clean on this line.
                listed = [t.group() for t in _TOKEN.finditer(match.group("codes"))]
                kept = [t for t in listed if not (t.upper().startswith("LL") and t.upper() not in CODES)]
                kept += [code for code in wanted if code not in {t.upper() for t in kept}]
                start, end = (comment.start[1] + match.start("codes"), comment.start[1] + match.end("codes"))
                body = body[:start] + ", ".join(kept) + body[end:]
            else:
                body = body.rstrip() + "  # noqa: " + ", ".join(wanted)
        else:
            body = body.rstrip() + "  # noqa: " + ", ".join(wanted)
        # The suppression reads the line's first ``# noqa``, which may sit in a
        # string before the comment: a directive that would not suppress is not written.
        read = suppressed_codes(body) or set()
        if "*" not in read and not set(wanted) <= read:
            refused.append(row)
            continue
        lines[row - 1] = body + newline
        added += 1
    return "".join(lines), added, refused
