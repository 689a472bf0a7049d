"""Step 1: command-line paths to the files to check.

Folders are walked without following symbolic links (a link loop cannot
trap the walk), skipping the usual excludes, the configured ones and what
.gitignore files ignore.  Explicitly named files are always checked, unless
``--force-exclude`` applies the excludes to them too (pre-commit passes
every staged file by name).
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from loadlint.config import Settings


@dataclass(frozen=True)
class Candidate:
    path: Path
    settings: Settings
    explicit: bool


def _matches(name: str, rel: str, patterns: tuple[str, ...]) -> bool:
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        if "/" in pattern:
            if fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase(rel, pattern + "/*"):
                return True
        elif fnmatch.fnmatchcase(name, pattern):
            return True
    return False


def is_excluded(path: Path, settings: Settings) -> bool:
    patterns = settings.exclude + settings.extend_exclude
    try:
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(settings.root)).replace(os.sep, "/")
    except ValueError:
        rel = path.as_posix()
    parts = rel.split("/")
    # A pattern excludes a path when it matches the path or any of its parents.
    for i in range(len(parts)):
        if _matches(parts[i], "/".join(parts[: i + 1]), patterns):
            return True
    return False


class _GitIgnore:
    """The .gitignore files that apply to a folder (its own and its parents')."""

    def __init__(self) -> None:
        self._specs: dict[Path, list[tuple[Path, object]]] = {}

    def specs_for(self, directory: Path, parent: list[tuple[Path, object]] | None) -> list[tuple[Path, object]]:
        cached = self._specs.get(directory)
        if cached is not None:
            return cached
        specs = list(parent or ())
        ignore_file = directory / ".gitignore"
        if ignore_file.is_file():
            try:
                import pathspec

                lines = ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()
                specs.append((directory, pathspec.GitIgnoreSpec.from_lines(lines)))
            except OSError:
                pass
        self._specs[directory] = specs
        return specs

    @staticmethod
    def ignored(path: Path, is_dir: bool, specs: list[tuple[Path, object]]) -> bool:
        result = False
        for base, spec in specs:
            rel = path.relative_to(base).as_posix()
            if is_dir:
                rel += "/"
            check = spec.check_file(rel)  # type: ignore[attr-defined]
            if check.include is not None:
                result = bool(check.include)
        return result


def _parent_gitignores(directory: Path, cache: _GitIgnore) -> list[tuple[Path, object]]:
    """.gitignore files from the repository root down to ``directory``."""
    chain: list[Path] = []
    for folder in (directory, *directory.parents):
        chain.append(folder)
        if (folder / ".git").exists():
            break
    else:
        chain = [directory]
    specs: list[tuple[Path, object]] = []
    for folder in reversed(chain):
        specs = cache.specs_for(folder, specs)
    return specs


def discover(
    paths: list[Path],
    settings_for: Callable[[Path], Settings],
    *,
    force_exclude: bool = False,
) -> Iterator[Candidate]:
    seen: set[Path] = set()
    gitignore = _GitIgnore()
    for root in paths:
        if root.is_dir():
            settings = settings_for(root)
            if force_exclude and is_excluded(root, settings):
                continue
            yield from _walk(root, settings_for, gitignore, seen)
        else:
            settings = settings_for(root)
            if force_exclude and is_excluded(root, settings):
                continue
            key = Path(os.path.abspath(root))
            if key not in seen:
                seen.add(key)
                yield Candidate(root, settings, explicit=True)


def _walk(root: Path, settings_for, gitignore: _GitIgnore, seen: set[Path]) -> Iterator[Candidate]:
    absolute_root = Path(os.path.abspath(root))
    settings = settings_for(root)
    specs = _parent_gitignores(absolute_root, gitignore) if settings.respect_gitignore else []
    stack: list[tuple[Path, Path, list]] = [(root, absolute_root, specs)]
    while stack:
        directory, absolute, specs = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue  # unreadable or vanished folder: nothing to check there
        settings = settings_for(directory)
        for entry in entries:
            path = directory / entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = entry.is_file()  # follows links to files; a dangling link is neither
            except OSError:
                continue
            if is_dir:
                if is_excluded(path, settings):
                    continue
                child_abs = absolute / entry.name
                if specs and gitignore.ignored(child_abs, True, specs):
                    continue
                child_specs = gitignore.specs_for(child_abs, specs) if settings.respect_gitignore else []
                stack.append((path, child_abs, child_specs))
            elif is_file:
                extension = entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
                if extension not in settings.extensions:
                    continue
                if is_excluded(path, settings):
                    continue
                if specs and gitignore.ignored(absolute / entry.name, False, specs):
                    continue
                key = absolute / entry.name
                if key in seen:
                    continue
                seen.add(key)
                yield Candidate(path, settings, explicit=False)
