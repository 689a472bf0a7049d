"""A cache entry's format: JSON written, and read back field by field.

Nothing read is trusted beyond what it is checked against: an entry is
JSON, never unpickled; a field of the wrong type, a truncated or crafted
file, an entry another version or configuration wrote, each reads as a
miss (None), whatever it raises while read.
"""

from __future__ import annotations

import json
import os
from typing import Any, cast

from loadlint import __version__
from loadlint.types import Edit, Finding, Fix, Location, Summary

#: Bumped whenever the entry layout changes.
SCHEMA = 4


class Entry:
    __slots__ = ("profile", "findings", "summary_json", "cells")

    def __init__(
        self, profile: str | None, findings: list[Finding], summary_json: str | None = None,
        cells: dict[int, str] | None = None,
    ) -> None:
        #: profile_key() of the profile the rules consulted; None when none did.
        self.profile = profile
        self.findings = findings
        #: The module's project summary (``loadlint.facts.summary``) as JSON, when it was parsed.
        self.summary_json = summary_json
        #: A notebook's checked cells (index -> source), which its report quotes.
        self.cells = cells or {}

    @property
    def summary(self) -> Summary | None:
        """The summary, decoded (None when absent or not a JSON object)."""
        return summary_from_json(self.summary_json)


def summary_from_json(text: str | None) -> Summary | None:
    """A summary kept as JSON text, decoded; None when absent or not a JSON object.

    Only its being an object is checked: the entry's stamp says this code
    wrote it, and project analysis reads it defensively."""
    if text is None:
        return None
    try:
        decoded = json.loads(text)
    except Exception:  # nested too deeply (RecursionError) included
        return None
    return cast(Summary, decoded) if isinstance(decoded, dict) else None


def entry_json(
    path: str, fingerprint: str, digest: str, stamp: str, profile: str | None, findings: list[Finding],
    summary: Summary | None = None, cells: dict[int, str] | None = None,
) -> bytes:
    """A file's entry as ``parse_entry`` reads it back."""
    payload = {
        "loadlint": __version__,
        "schema": SCHEMA,
        "stamp": stamp,
        "path": os.path.abspath(path),
        "fingerprint": fingerprint,
        "digest": digest,
        "profile": profile,
        "findings": [finding_to_json(f) for f in findings],
        # A string: a warm run whose project findings are cached too
        # never decodes it.
        "summary": None if summary is None else json.dumps(summary, separators=(",", ":")),
        "cells": {str(index): source for index, source in (cells or {}).items()},
    }
    return json.dumps(payload, separators=(",", ":")).encode()


def _location(loc: Location) -> list[int]:
    return [loc.row, loc.column]


def finding_to_json(f: Finding) -> dict[str, Any]:
    out: dict[str, Any] = {
        "code": f.code,
        "name": f.name,
        "message": f.message,
        "location": _location(f.location),
        "end_location": _location(f.end_location),
        "cell": f.cell,
        "fix": None,
    }
    if f.fix_withheld is not None:
        out["fix_withheld"] = f.fix_withheld
    if f.fix is not None:
        out["fix"] = {
            "applicability": f.fix.applicability,
            "message": f.fix.message,
            "edits": [
                [e.content, e.start, e.end, _location(e.location), _location(e.end_location)] for e in f.fix.edits
            ],
        }
    return out


class Invalid(Exception):
    pass


def expect(value: Any, kind: type | tuple[type, ...]) -> Any:
    # bool is an int; a position of ``true`` is as wrong as one of "1".
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise Invalid
    return value


def _read_location(value: Any) -> Location:
    expect(value, list)
    if len(value) != 2:
        raise Invalid
    return Location(expect(value[0], int), expect(value[1], int))


def read_finding(raw: Any, path: str) -> Finding:
    expect(raw, dict)
    fix = None
    raw_fix = raw.get("fix")
    if raw_fix is not None:
        expect(raw_fix, dict)
        applicability = raw_fix.get("applicability")
        if applicability not in ("safe", "unsafe"):
            raise Invalid
        edits = []
        for edit in expect(raw_fix.get("edits"), list):
            expect(edit, list)
            if len(edit) != 5:
                raise Invalid
            edits.append(
                Edit(
                    expect(edit[0], str),
                    expect(edit[1], int),
                    expect(edit[2], int),
                    _read_location(edit[3]),
                    _read_location(edit[4]),
                )
            )
        fix = Fix(applicability, expect(raw_fix.get("message"), str), tuple(edits))
    cell = raw.get("cell")
    if cell is not None:
        expect(cell, int)
    withheld = raw.get("fix_withheld")
    if withheld is not None:
        expect(withheld, str)
    return Finding(
        expect(raw.get("code"), str),
        expect(raw.get("name"), str),
        expect(raw.get("message"), str),
        path,
        _read_location(raw.get("location")),
        _read_location(raw.get("end_location")),
        fix,
        cell,
        withheld,
    )


def parse_entry(raw: bytes, path: str, fingerprint: str, digest: str, stamp: str) -> Entry | None:
    try:
        data = json.loads(raw)
        expect(data, dict)
        if (
            data.get("loadlint") != __version__
            or data.get("schema") != SCHEMA
            or data.get("stamp") != stamp
            or data.get("path") != os.path.abspath(path)
            or data.get("fingerprint") != fingerprint
            or data.get("digest") != digest
        ):
            return None
        profile = data.get("profile")
        if profile is not None:
            expect(profile, str)
        findings = [read_finding(f, path) for f in expect(data.get("findings"), list)]
        summary = data.get("summary")
        if summary is not None:
            expect(summary, str)
        cells = {int(expect(k, str)): expect(v, str) for k, v in expect(data.get("cells"), dict).items()}
    except Exception:  # a corrupt or crafted entry is a miss, whatever it raises
        return None
    return Entry(profile, findings, summary, cells)
