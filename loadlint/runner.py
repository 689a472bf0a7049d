"""Runs a check or fix over paths for the command line: discovery, the
per-file work, and the report.  Kept apart from cli.py so the CLI stays a
thin layer of option parsing."""

from __future__ import annotations

from pathlib import Path

import click

from loadlint.api import FixRequest, ProfileCache, Run, check_file
from loadlint.config import Resolver
from loadlint.discover import discover


def execute(paths: list[Path], resolver: Resolver, kw: dict) -> int:
    from loadlint.cli import _print_diff, _report

    fixing = bool(kw["fix"] or kw["diff"])
    first = resolver.for_path(paths[0])
    unsafe = kw["unsafe_fixes"] if kw["unsafe_fixes"] is not None else first.unsafe_fixes
    request = FixRequest(unsafe=unsafe, dry_run=bool(kw["diff"])) if fixing else None
    profiles = ProfileCache()
    run = Run()
    for candidate in discover(paths, resolver.for_path, force_exclude=kw["force_exclude"]):
        run.files += 1
        result = check_file(candidate, profiles, request)
        if result.findings or result.error or result.fixed is not None:
            run.results.append(result)
    run.results.sort(key=lambda r: r.path)
    if kw["diff"]:
        return _print_diff(run)
    return _report(run, first, kw, fixing=fixing, unsafe=unsafe)
