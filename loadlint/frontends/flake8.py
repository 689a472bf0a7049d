"""loadlint as a flake8 plugin (entry point ``LL = "loadlint.frontends.flake8:Plugin"``).

Teams that already run flake8 get loadlint's findings in the same report.
The findings are the command line's: the configuration of the file's
project (selection, per-file ignores, ``[tool.loadlint.target]``) applies.
flake8 selects, ignores and honours ``# noqa`` itself.

flake8 adds one to the column a plugin yields, so the column is 0-based
here (TorchFix yields the 1-based one and reports one column too far).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from loadlint import __version__

if TYPE_CHECKING:
    from loadlint.api import ProfileCache
    from loadlint.workspace.config import ConfigResolver


class Plugin:
    """The flake8 plugin: loadlint's findings with the project's configuration."""

    name = "loadlint"
    version = __version__

    #: One resolver and hardware profile cache per flake8 process: flake8
    #: instantiates the plugin once per file.
    _resolver: ConfigResolver | None = None
    _profiles: ProfileCache | None = None

    def __init__(self, tree: Any, lines: list[str], filename: str = "stdin") -> None:
        self.lines = lines
        self.filename = filename

    @classmethod
    def _shared(cls) -> tuple[ConfigResolver, ProfileCache]:
        if cls._resolver is None or cls._profiles is None:
            from loadlint.api import ProfileCache
            from loadlint.workspace.config import Overrides, ConfigResolver

            cls._resolver = ConfigResolver(Overrides())
            cls._profiles = ProfileCache()
        return cls._resolver, cls._profiles

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        """Yield flake8's (row, column, message, type) for each finding."""
        from loadlint.workspace.config import ConfigError
        from loadlint.sources.prefilter import may_construct_loader
        from loadlint.sources.source import visible

        text = "".join(self.lines)
        if not may_construct_loader(text):
            return
        # Only now: most files of a repository never reach the analysis, nor pay for importing it.
        from loadlint.api import check_text, options_for

        path = self.filename if self.filename not in ("stdin", "-", None) else "stdin.py"
        if path != "stdin.py" and _leaves_project(path):
            return  # as ``check`` passes over it: what a link leads to outside the project is not the project's
        resolver, profiles = self._shared()
        try:
            settings = resolver.for_path(Path(path))
        except ConfigError as exc:
            # flake8 has no channel for a broken config but a finding.
            # A key holding a line break must not print a line of its own.
            yield 1, 0, f"LL000 loadlint configuration error: {visible(str(exc))}", type(self)
            return
        # flake8 applies ``# noqa`` itself (and honours --disable-noqa).
        options = dataclasses.replace(options_for(settings, path, profiles), noqa=False)
        for finding in check_text(text, path, options):
            yield finding.location.row, finding.location.column - 1, f"{finding.code} {visible(finding.message)}", type(self)


def _leaves_project(path: str) -> bool:
    """Whether ``path`` reaches, through a link, a file outside its project
    (flake8 read it already: the lines it hands over must not be analysed)."""
    from loadlint.sources.boundary import is_inside, project_root

    link = os.path.abspath(path)
    real = os.path.realpath(path)
    return real != link and not is_inside(real, str(project_root(Path(link).parent)), resolved=True)
