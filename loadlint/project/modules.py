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

from loadlint.sources.boundary import MAX_ASCENT, ROOT_MARKERS, is_inside, project_root


def shown_path(path: str) -> str:
    """A path as messages quote it: relative to where the user stands, as
    the findings' own paths are (``../data.py`` from a sibling folder)."""
    try:
        shown = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        shown = ".."
    # Outside the current folder, the absolute path, as a finding's own path reads.
    return Path(path if shown.startswith("..") else shown).as_posix()


__all__ = ["MAX_ASCENT", "ROOT_MARKERS", "ModuleResolver", "project_root", "shown_path"]


class ModuleResolver:
    """Resolves imports of project files to project files, with a memo."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.abspath(root))
        self._real_root = os.path.realpath(self.root)
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
        # A relative import climbing above the root, or a module linked to a
        # file elsewhere, names what is not the project's: its values stay unknown.
        if found is not None and not is_inside(found[0], self._real_root):
            found = None
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
