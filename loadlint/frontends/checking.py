"""What ``loadlint check`` and ``loadlint fix`` ask for: their options as
parsed, and the run over paths those make through the API."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from loadlint.types import HUMAN_FORMATS, FixRequest, Run

if TYPE_CHECKING:
    from loadlint.workspace.config import ConfigResolver


@dataclass(frozen=True)
class CheckOptions:
    """``loadlint check`` / ``loadlint fix`` as the command line parsed them.

    The command line's own: most fields are about the report (format,
    colour, statistics, diff), which the API never reads; the API takes the
    few that shape a run (``jobs``, the cache, ``force_exclude``) by name."""

    paths: tuple[str, ...] = ()
    fix: bool | None = None
    unsafe_fixes: bool | None = None
    diff: bool = False
    show_fixes: bool = False
    exit_zero: bool = False
    exit_non_zero_on_fix: bool = False
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    per_file_ignores: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    extend_exclude: tuple[str, ...] = ()
    force_exclude: bool = False
    respect_gitignore: bool | None = None
    targets: tuple[str, ...] = ()
    output_format: str | None = None
    output_file: str | None = None
    statistics: bool = False
    no_cache: bool = False
    cache_dir: str | None = None
    config_path: str | None = None
    isolated: bool = False
    stdin_filename: str | None = None
    show_settings: bool = False
    color: str = "auto"
    quiet: bool = False
    jobs: int | None = None
    from_verify: str | None = None
    add_noqa: bool = False

    @property
    def fixing(self) -> bool:
        """Fixes are computed (written, or shown with --diff)."""
        return bool(self.fix or self.diff)


def run_paths(paths: list[Path], resolver: ConfigResolver, options: CheckOptions, request: FixRequest | None, fmt: str) -> Run:
    """The run over ``paths``: cache and pool as ``options`` ask, progress
    on a terminal's stderr for the human formats."""
    from loadlint.api import check_paths

    progress = fmt in HUMAN_FORMATS and not options.quiet and _is_tty(sys.stderr)
    return check_paths(paths, resolver=resolver, force_exclude=options.force_exclude, fix=request, jobs=options.jobs,
                       cache=not options.no_cache, cache_dir=options.cache_dir, progress=progress)


def _is_tty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
