"""Which file an import names, as Python would find it when the user runs
``python train.py`` (the script's folder first on ``sys.path``) or imports
an installed package from the project (its root, or ``src/``).

Resolution only probes the file system along the importer's ancestors up to
the project root (a bounded number of ``stat`` calls): no tree is scanned,
so a 10,000-module tree or a symlink loop costs nothing here.  Two modules
with the same name in different folders resolve to the nearest one, as
``sys.path[0]`` does.
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


class Resolver:
    """Resolves imports of project files to project files, with a memo."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.abspath(root))
        self._memo: dict[tuple[str, str], str | None] = {}
        self._listings: dict[str, frozenset[str]] = {}
        self._folders: dict[str, list[str]] = {}

    def _bases(self, folder: str) -> list[str]:
        """Folders an absolute import from a module in ``folder`` may start
        from, nearest first (strings: ``pathlib`` was most of the cost)."""
        bases = self._folders.get(folder)
        if bases is not None:
            return bases
        bases = []
        root = str(self.root)
        inside = root.rstrip(os.sep) + os.sep
        at = folder
        for _ in range(MAX_ASCENT):
            bases.append(at)
            if at == root or not at.startswith(inside):
                break
            at = os.path.dirname(at)
        for extra in (root, os.path.join(root, "src")):
            if extra not in bases:
                bases.append(extra)
        self._folders[folder] = bases
        return bases

    def module_file(self, importer: str, dotted: str) -> tuple[str, str] | None:
        """(file, rest) for a qualified name as ``importer`` writes it:
        the file of the longest module prefix of ``dotted`` and the rest
        (a function or ``Class.method``), or None outside the project."""
        key = (os.path.dirname(importer), dotted)
        if key in self._memo:
            cached = self._memo[key]
            return None if cached is None else (cached.split("\0")[0], cached.split("\0")[1])
        found = self._find(key[0], dotted)
        self._memo[key] = None if found is None else "\0".join(found)
        return found

    def _listing(self, folder: str) -> frozenset[str]:
        names = self._listings.get(folder)
        if names is None:
            try:
                names = frozenset(os.listdir(folder))
            except OSError:  # missing, not a folder, a symlink loop
                names = frozenset()
            self._listings[folder] = names
        return names

    def _module_at(self, base: str, head: list[str]) -> str | None:
        """``base/a/b.py`` or ``base/a/b/__init__.py`` for ``a.b``, by
        folder listings (one ``listdir`` per folder, however many imports)."""
        folder = base
        for part in head[:-1]:
            if part not in self._listing(folder):
                return None
            folder = os.path.join(folder, part)
        last = head[-1]
        names = self._listing(folder)
        if last + ".py" in names:
            return os.path.join(folder, last + ".py")
        if last in names and "__init__.py" in self._listing(os.path.join(folder, last)):
            return os.path.join(folder, last, "__init__.py")
        return None

    def _find(self, folder: str, dotted: str) -> tuple[str, str] | None:
        level = len(dotted) - len(dotted.lstrip("."))
        parts = [p for p in dotted.lstrip(".").split(".") if p]
        if not parts:
            return None
        if level:
            base = folder
            for _ in range(level - 1):
                base = os.path.dirname(base)
            bases = [base]
        else:
            bases = self._bases(folder)
        for base in bases:
            # The first part decides: Python takes the first folder that has it.
            if not ({parts[0], parts[0] + ".py"} & self._listing(base)):
                continue
            for cut in range(len(parts) - 1, 0, -1):
                found = self._module_at(base, parts[:cut])
                if found is not None:
                    return found, ".".join(parts[cut:])
            return None
        return None
