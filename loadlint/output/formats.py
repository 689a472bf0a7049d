"""Output formats for CI systems: SARIF, GitHub annotations, GitLab Code
Quality, JUnit XML and pylint-style lines.

Kept out of ``report.py`` because only CI runs need them;
``report.FORMATTERS`` names them, and they are imported on first use.  Positions are
1-based everywhere (end columns exclusive), as in the text and JSON output.
Paths are made relative to the repository root (the closest folder above
the working directory holding ``.git``, else the working directory), since
that is what GitHub code scanning and GitLab resolve them against.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from loadlint import __version__
from loadlint.sources.boundary import project_root
from loadlint.sources.files import read_source
from loadlint.sources.nbjson import cell_lines
from loadlint.output.report import Sources, Style, Summary, severity
from loadlint.rules import CODES, category_of, rule_class
from loadlint.sources.source import lines as split_lines
from loadlint.sources.source import visible, visible_json
from loadlint.types import FileResult, Finding, Location, Run

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/loadlint/loadlint"


# -- shared helpers --------------------------------------------------------


def repository_root(start: Path | None = None) -> Path:
    """The git work tree containing ``start`` (default: cwd), else ``start``."""
    start = (start or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return start


def relative_uri(path: str, root: Path) -> str | None:
    """``path`` relative to ``root`` with forward slashes; None when outside it."""
    absolute = Path(os.path.abspath(path))
    try:
        rel = absolute.relative_to(root)
    except ValueError:
        return None
    return rel.as_posix()


def _display_path(path: str, root: Path) -> str:
    return relative_uri(path, root) or Path(os.path.abspath(path)).as_posix()


def _message(finding: Finding) -> str:
    # A notebook finding's position is inside a cell: the message names it,
    # and the formats point at the line of the .ipynb JSON holding that row
    # of the cell (``notebook_line``), with no column (JSON escapes shift them).
    if finding.cell is not None:
        where = f"cell {finding.cell}, line {finding.location.row}, column {finding.location.column}"
        return f"{where}: {finding.message}"
    return finding.message


def _file_row(finding: Finding) -> int:
    if finding.cell is None:
        return finding.location.row
    return notebook_line(finding) or 1


def notebook_line(finding: Finding) -> int | None:
    """The line of the ``.ipynb`` file where a notebook finding's source row
    sits (its JSON string), or None when the file cannot be read (stdin)."""
    assert finding.cell is not None
    try:
        stat = os.stat(finding.path)
    except OSError:
        return None
    rows = _cell_lines(finding.path, stat.st_mtime_ns, stat.st_size).get(finding.cell, [])
    row = finding.location.row
    return rows[row - 1] if 1 <= row <= len(rows) else None


@functools.lru_cache(maxsize=32)
def _cell_lines(path: str, mtime_ns: int, size: int) -> dict[int, list[int]]:
    # The stat in the key: a file rewritten (fixed) since is read again.
    try:
        text = read_source(path, within=str(project_root(Path(path)))).decode("utf-8-sig")
        return cell_lines(text)
    except (OSError, ValueError):
        return {}


class _Lines:
    """Source lines per file, for fingerprints: from the run when it kept the
    text, else from disk (cached results may not carry the source)."""

    def __init__(self, results: list[FileResult]) -> None:
        self._text = {r.path: r.source.text for r in results if r.source is not None}
        # A file the run could not read (too large, a FIFO, a link out) is not read again.
        self._text.update((r.path, "") for r in results if r.source is None and any(f.code == "LL901" for f in r.findings))
        self._lines: dict[str, list[str]] = {}
        self._roots: dict[str, Path | None] = {}

    def get(self, path: str) -> list[str]:
        lines = self._lines.get(path)
        if lines is None:
            text = self._text.get(path)
            if text is None:
                text = _read_text(path, self._roots)
            lines = split_lines(text)
            self._lines[path] = lines
        return lines

    def line(self, path: str, row: int) -> str:
        lines = self.get(path)
        return lines[row - 1] if 1 <= row <= len(lines) else ""


def _read_text(path: str, roots: dict[str, Path | None] | None = None) -> str:
    """A file's text as ``check`` reads it (regular files only, bounded, no
    link out of its project); empty when it cannot be read."""
    try:
        within = str(project_root(Path(path), roots))
        data = read_source(path, within=within)
    except OSError:
        return ""
    # As a file opened in text mode reads it: the fingerprints stay those of earlier versions.
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def _fingerprints(run: Run, root: Path) -> dict[int, tuple[str, int]]:
    """A content hash per finding that survives lines moving up or down.

    Hash of (code, repository-relative path, the reported line without
    surrounding whitespace), plus the occurrence index among findings with
    the same hash so that two identical lines stay distinct.  Keyed by
    ``id(finding)``.
    """
    sources = _Lines(run.results)
    seen: dict[str, int] = {}
    out: dict[int, tuple[str, int]] = {}
    for finding in run.findings:
        # A notebook's rows are inside cells, not lines of the file on disk.
        text = "" if finding.cell is not None else sources.line(finding.path, finding.location.row).strip()
        key = "\0".join((finding.code, _display_path(finding.path, root), str(finding.cell or ""), text))
        # A file name that is not UTF-8 holds lone surrogates (os.fsdecode).
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        index = seen.get(digest, 0)
        seen[digest] = index + 1
        out[id(finding)] = (digest, index)
    return out


def _enabled_codes(run: Run, summary: Summary) -> list[str]:
    enabled = set(getattr(summary, "enabled", None) or ())
    if not enabled:
        from loadlint.workspace.config import Settings

        enabled = set(Settings().codes())
    enabled |= {f.code for f in run.findings}
    return sorted(code for code in enabled if code in CODES)


# -- SARIF -----------------------------------------------------------------


def _region(start: Location, end: Location) -> dict[str, Any]:
    return {
        "startLine": start.row,
        "startColumn": start.column,
        "endLine": end.row,
        "endColumn": end.column,
    }


def _section(doc: str, heading: str) -> str:
    """The text under a Markdown heading, up to the next heading."""
    out: list[str] = []
    inside = False
    for line in doc.splitlines():
        if line.startswith("#"):
            if inside:
                break
            inside = line.strip() == heading
            continue
        if inside:
            out.append(line)
    return " ".join(" ".join(out).split())


def _sarif_rule(code: str) -> dict[str, Any]:
    rule = rule_class(code)
    doc = rule.documentation()
    return {
        "id": code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": _section(doc, "## What it does") or rule.summary},
        "help": {"text": doc, "markdown": doc},
        "helpUri": rule.url(),
        "defaultConfiguration": {"level": severity(code)},
        "properties": {"fixAvailability": rule.fix_availability, "tags": [rule.name]},
    }


def _artifact(path: str, root: Path) -> dict[str, Any]:
    uri = relative_uri(path, root)
    if uri is None:
        return {"uri": Path(os.path.abspath(path)).as_uri()}
    return {"uri": uri, "uriBaseId": "%SRCROOT%"}


def _sarif_result(finding: Finding, rule_index: dict[str, int], root: Path, fingerprint: tuple[str, int]) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": _artifact(finding.path, root)}
    if finding.cell is None:
        physical["region"] = _region(finding.location, finding.end_location)
    elif (line := notebook_line(finding)) is not None:
        # The line of the JSON string holding the cell's row: where code
        # scanning shows it in the notebook's diff (the message names the cell).
        physical["region"] = {"startLine": line}
    location = {"physicalLocation": physical}
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "level": severity(finding.code),
        "message": {"text": _message(finding)},
        "locations": [location],
        "partialFingerprints": {"primaryLocationLineHash": f"{fingerprint[0][:16]}:{fingerprint[1] + 1}"},
    }
    if finding.code in rule_index:
        result["ruleIndex"] = rule_index[finding.code]
    if finding.cell is not None:
        result["properties"] = {
            "cell": finding.cell,
            "cellRegion": _region(finding.location, finding.end_location),
        }
    if finding.fix_withheld is not None:
        result.setdefault("properties", {})["fix_withheld"] = finding.fix_withheld
    # A notebook fix's positions are in cell coordinates: applied to the
    # .ipynb file as SARIF replacements they would corrupt it.
    if finding.fix is not None and finding.cell is None:
        result["fixes"] = [
            {
                "description": {"text": finding.fix.message},
                "artifactChanges": [
                    {
                        "artifactLocation": _artifact(finding.path, root),
                        "replacements": [
                            {
                                "deletedRegion": _region(edit.location, edit.end_location),
                                "insertedContent": {"text": edit.content},
                            }
                            for edit in finding.fix.edits
                        ],
                    }
                ],
                "properties": {"applicability": finding.fix.applicability},
            }
        ]
    return result


def sarif_log(run: Run, summary: Summary, root: Path | None = None) -> dict[str, Any]:
    """The SARIF 2.1.0 log as a dict (the formatter serialises it)."""
    root = root or repository_root()
    codes = _enabled_codes(run, summary)
    rule_index = {code: i for i, code in enumerate(codes)}
    fingerprints = _fingerprints(run, root)
    results = [_sarif_result(f, rule_index, root, fingerprints[id(f)]) for f in run.findings]
    notifications = [
        {
            "level": "error",
            "message": {"text": r.error},
            "locations": [{"physicalLocation": {"artifactLocation": _artifact(r.path, root)}}],
        }
        for r in run.results
        if r.error
    ]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "loadlint",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": INFORMATION_URI,
                        "rules": [_sarif_rule(code) for code in codes],
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": root.as_uri() + "/"}},
                "columnKind": "unicodeCodePoints",
                "invocations": [
                    {"executionSuccessful": not notifications, "toolExecutionNotifications": notifications}
                ],
                "results": results,
            }
        ],
    }


def format_sarif(run: Run, summary: Summary, style: Style, sources: Sources) -> str:
    """A SARIF 2.1.0 log (GitHub code scanning)."""
    return visible_json(json.dumps(sarif_log(run, summary), indent=2)) + "\n"


# -- GitHub Actions workflow commands -------------------------------------


def escape_data(text: str) -> str:
    """As ``escapeData`` in @actions/core: the message after ``::``."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """As ``escapeProperty`` in @actions/core: also ``:`` and ``,``, which
    would otherwise end the property list or the command."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_github(run: Run, summary: Summary, style: Style, sources: Sources) -> str:
    """GitHub Actions workflow commands (annotations)."""
    root = repository_root()
    out = []
    for result in run.results:
        path = _display_path(result.path, root)
        for finding in result.findings:
            # GitHub caps annotations per level (10 errors, 10 warnings per
            # step), so the severity split also shows more of them.
            level = severity(finding.code)
            props = [("file", path)]
            if finding.cell is None:
                props += [
                    ("line", str(finding.location.row)),
                    ("col", str(finding.location.column)),
                    ("endLine", str(finding.end_location.row)),
                    ("endColumn", str(finding.end_location.column)),
                ]
            elif (line := notebook_line(finding)) is not None:
                props.append(("line", str(line)))
            props.append(("title", f"loadlint ({finding.code})"))
            # Escaped as every report line first: @actions/core's escapes
            # leave escape sequences and ``##[`` as they are.
            prop_text = ",".join(f"{key}={escape_property(visible(value))}" for key, value in props)
            out.append(f"::{level} {prop_text}::{escape_data(visible(_message(finding)))}")
        if result.error:
            error_props = f"file={escape_property(visible(path))},title={escape_property('loadlint (error)')}"
            out.append(f"::error {error_props}::{escape_data(visible(result.error))}")
    return "".join(line + "\n" for line in out)


# -- GitLab Code Quality ----------------------------------------------------

_GITLAB_SEVERITY = {"error": "major", "warning": "minor"}


def gitlab_severity(code: str) -> str:
    """GitLab Code Quality's severity for a code."""
    # A file that cannot be parsed or read hides every other finding in it.
    if code in CODES and category_of(code).key in ("syntax", "unreadable"):
        return "blocker"
    return _GITLAB_SEVERITY[severity(code)]


def _gitlab_category(code: str) -> str:
    """Code Quality's category: slow paths are performance, the rest bug risks."""
    return "Performance" if code in CODES and category_of(code).key == "performance" else "Bug Risk"


def format_gitlab(run: Run, summary: Summary, style: Style, sources: Sources) -> str:
    """A GitLab Code Quality report."""
    root = repository_root()
    fingerprints = _fingerprints(run, root)
    issues = []
    for result in run.results:
        path = _display_path(result.path, root)
        for finding in result.findings:
            digest, index = fingerprints[id(finding)]
            fingerprint = hashlib.md5(f"{digest}:{index}".encode()).hexdigest()
            issues.append(
                {
                    "type": "issue",
                    "check_name": finding.code,
                    "description": f"{finding.code} {_message(finding)}",
                    "categories": [_gitlab_category(finding.code)],
                    "severity": gitlab_severity(finding.code),
                    "fingerprint": fingerprint,
                    "location": {
                        "path": path,
                        "lines": {"begin": _file_row(finding), "end": _file_row(finding) + (
                            0 if finding.cell is not None else finding.end_location.row - finding.location.row
                        )},
                    },
                }
            )
        if result.error:
            issues.append(
                {
                    "type": "issue",
                    "check_name": "loadlint-error",
                    "description": result.error,
                    "categories": ["Bug Risk"],
                    "severity": "blocker",
                    "fingerprint": hashlib.md5(f"error\0{path}\0{result.error}".encode("utf-8", "surrogatepass")).hexdigest(),
                    "location": {"path": path, "lines": {"begin": 1}},
                }
            )
    return visible_json(json.dumps(issues, indent=2)) + "\n"


# -- JUnit XML ------------------------------------------------------------


def _xml(text: str) -> str:
    # XML 1.0 has no lone surrogates (a file name that is not UTF-8) and no
    # U+FFFE/U+FFFF: escaped, so the report stays well-formed.
    return visible(text, strict=True)


def format_junit(run: Run, summary: Summary, style: Style, sources: Sources) -> str:
    """JUnit XML: one test suite per file, one failure per finding."""
    suites = ET.Element("testsuites", name="loadlint")
    total = failures = errors = 0
    if not run.results:
        suite = ET.SubElement(suites, "testsuite", name="loadlint", tests="1", failures="0", errors="0")
        ET.SubElement(suite, "testcase", name="All checks passed", classname="loadlint")
        total = 1
    for result in run.results:
        n_fail = len(result.findings)
        n_err = 1 if result.error else 0
        suite = ET.SubElement(
            suites, "testsuite", name=_xml(result.path), tests=str(n_fail + n_err), failures=str(n_fail), errors=str(n_err)
        )
        for finding in result.findings:
            case = ET.SubElement(
                suite,
                "testcase",
                name=f"org.loadlint.{finding.code}",
                classname=_xml(result.path),
                file=_xml(result.path),
                line=str(_file_row(finding)),
            )
            failure = ET.SubElement(case, "failure", message=_xml(_message(finding)), type=finding.code)
            if finding.cell is None:
                failure.text = f"line {finding.location.row}, col {finding.location.column}, {_xml(finding.message)}"
            else:
                failure.text = _xml(_message(finding))
        if result.error:
            case = ET.SubElement(suite, "testcase", name="org.loadlint.error", classname=_xml(result.path), file=_xml(result.path))
            ET.SubElement(case, "error", message=_xml(result.error)).text = _xml(result.error)
        total += n_fail + n_err
        failures += n_fail
        errors += n_err
    suites.set("tests", str(total))
    suites.set("failures", str(failures))
    suites.set("errors", str(errors))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


# -- pylint -----------------------------------------------------------------


def format_pylint(run: Run, summary: Summary, style: Style, sources: Sources) -> str:
    """pylint's parseable ``path:line: [code] message`` lines."""
    out = []
    for result in run.results:
        for finding in result.findings:
            out.append(f"{visible(finding.path)}:{_file_row(finding)}: [{finding.code}] {visible(_message(finding))}")
        if result.error:
            out.append(f"{visible(result.path)}:1: [error] {visible(result.error)}")
    return "".join(line + "\n" for line in out)


__all__ = [
    "escape_data",
    "escape_property",
    "format_github",
    "format_gitlab",
    "format_junit",
    "format_pylint",
    "format_sarif",
    "repository_root",
    "sarif_log",
]
