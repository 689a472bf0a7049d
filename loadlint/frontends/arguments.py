"""Command-line values turned into settings, and the one-line error exit.

Exit codes (ruff's): 0 clean or everything fixed, 1 findings remain (or
``--diff`` has a diff), 2 usage, configuration or internal error.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from loadlint.sources.source import visible
from loadlint.types import Target

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def target_error() -> type[Exception]:
    # Evaluated only while an exception is being handled: a clean run never
    # pays for importing loadlint.hardware.detect.
    from loadlint.hardware.detect import TargetError

    return TargetError


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print one error line and exit."""
    # One line: a path in the message cannot break it or reach the terminal raw.
    click.echo(f"loadlint: error: {visible(message)}", err=True)
    sys.exit(code)


def split_values(values: tuple[str, ...]) -> tuple[str, ...] | None:
    if not values:
        return None
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def parse_targets(values: tuple[str, ...]) -> Target:
    """The ``--target`` options, a later one's keys over an earlier one's."""
    target = Target()
    if not values:
        return target
    from loadlint.hardware.detect import parse_target

    for value in values:
        target = parse_target(value).over(target)
    return target


def per_file_ignores(values: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...] | None:
    if not values:
        return None
    from loadlint.workspace.config import expand

    entries: list[tuple[str, tuple[str, ...]]] = []
    for value in values:
        pattern, sep, codes = value.rpartition(":")
        if not sep or not pattern:
            raise click.BadParameter(f"expected GLOB:CODES, got {value!r}", param_hint="--per-file-ignores")
        listed = tuple(c.strip() for c in codes.split(",") if c.strip())
        # Refused here as the same codes are in pyproject.toml.
        expand(listed, f"--per-file-ignores {pattern}")
        entries.append((pattern, listed))
    return tuple(entries)


def selectors(values: tuple[str, ...], flag: str) -> tuple[str, ...] | None:
    """A selection option's codes, each checked under the flag it came with."""
    codes = split_values(values)
    if codes:
        from loadlint.workspace.config import expand

        expand(codes, flag)
    return codes
