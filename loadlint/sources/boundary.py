"""Where a project ends: the folder loadlint may read, resolve imports in
and write to.  What lies outside it (a link's target, a relative import
climbing above it) is not the repository's and is never read for it.

The project root of a path is the nearest folder above it with a config
file or a version-control folder; the path's own folder when there is none.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Files or folders that mark a project's root (the nearest one wins).
ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".loadlint.toml", "loadlint.toml", ".git", ".hg")
#: Ancestors searched for a root before giving up (the file's own folder is then the root).
MAX_ASCENT = 32


def _marks_root(folder: str) -> bool:
    """``folder`` holds a root marker.  A ``setup.py`` that is its only one,
    beside an ``__init__.py``, is a module of that package (Lightning's
    ``trainer/setup.py``), not a project's packaging script."""
    present = [marker for marker in ROOT_MARKERS if os.path.exists(os.path.join(folder, marker))]
    if present == ["setup.py"]:
        return not os.path.exists(os.path.join(folder, "__init__.py"))
    return bool(present)


def project_root(start: Path, memo: dict[str, Path | None] | None = None) -> Path:
    """The nearest folder at or above ``start`` holding a root marker (a
    config file or a version-control folder); ``start`` itself when none.
    ``memo`` keeps, for the folders passed on the way (as strings), the root
    above them (None: none within reach), for the next call."""
    folder = os.path.abspath(start if start.is_dir() else start.parent)
    memo = {} if memo is None else memo
    passed: list[str] = []
    found: Path | None = None
    # Searched up to the file system's root: a folder passed without a root
    # has none, whichever file's search passed it.
    whole = False
    candidate = folder
    for _ in range(MAX_ASCENT + 1):
        if candidate in memo:
            found = memo[candidate]
            whole = True
            break
        passed.append(candidate)
        if _marks_root(candidate):
            found = Path(candidate)
            break
        parent = os.path.dirname(candidate)
        if parent == candidate:
            whole = True
            break
        candidate = parent
    if found is not None or whole:
        # Cut short by ``MAX_ASCENT``, how far the search reached depends on the start.
        for seen in passed:
            memo[seen] = found
    return Path(folder) if found is None else found


#: Folders' real paths: a project root is asked about once per file.
_real_folders: dict[str, str] = {}


def is_inside(path: str, folder: str, *, resolved: bool = False) -> bool:
    """Whether ``path`` is ``folder`` or below it, links resolved on both
    (``resolved``: ``path`` is a real path already)."""
    real = path if resolved else os.path.realpath(path)
    # Keyed absolute: a relative folder names another place once the current folder changes.
    key = folder if os.path.isabs(folder) else os.path.abspath(folder)
    base = _real_folders.get(key)
    if base is None:
        base = _real_folders[key] = os.path.realpath(key)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def repository_root(start: Path) -> Path:
    """The nearest folder at or above ``start`` with a version-control
    folder (a monorepo's configurations extend one another up to it);
    ``project_root(start)`` when there is none."""
    folder = Path(os.path.abspath(start))
    for candidate in (folder, *list(folder.parents)[:MAX_ASCENT]):
        if os.path.exists(candidate / ".git") or os.path.exists(candidate / ".hg"):
            return candidate
    return project_root(folder)
