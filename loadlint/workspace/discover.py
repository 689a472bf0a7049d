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
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from loadlint.sources.boundary import is_inside, project_root, repository_root
from loadlint.workspace.config import CONFIG_FILES, Settings
from loadlint.sources.files import read_source
from loadlint.workspace.wildmatch import LinearSpec, check_file, star_runs

#: Lines with this many runs of ``*`` or more are not made into regexes.
MAX_STAR_RUNS = 3
#: The most bytes of one .gitignore read.
MAX_IGNORE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Candidate:
    path: Path
    settings: Settings
    explicit: bool
    #: The folder a found file's links must stay in (its project root);
    #: None for a file the user named, which is read wherever it leads.
    within: str | None = None


class _Matcher:
    """The exclude patterns of one settings object, compiled once.

    The default excludes are plain names, which a set lookup answers; only
    real glob patterns go through a regular expression.  A tree of
    thousands of files would otherwise make a hundred thousand
    ``fnmatchcase`` calls just to learn that nothing is excluded.
    """

    _compiled: dict[tuple[str, ...], _Matcher] = {}

    def __init__(self, patterns: tuple[str, ...]) -> None:
        names: set[str] = set()
        name_globs: list[str] = []
        rel_globs: list[str] = []
        for pattern in patterns:
            pattern = pattern.rstrip("/")
            if "/" in pattern:
                rel_globs += [fnmatch.translate(pattern), fnmatch.translate(pattern + "/*")]
            elif any(ch in pattern for ch in "*?["):
                name_globs.append(fnmatch.translate(pattern))
            else:
                names.add(pattern)
        self.names = frozenset(names)
        self.name_re = re.compile("|".join(f"(?:{g})" for g in name_globs)) if name_globs else None
        self.rel_re = re.compile("|".join(f"(?:{g})" for g in rel_globs)) if rel_globs else None

    @classmethod
    def of(cls, patterns: tuple[str, ...]) -> _Matcher:
        matcher = cls._compiled.get(patterns)
        if matcher is None:
            matcher = cls._compiled[patterns] = cls(patterns)
        return matcher

    def matches(self, name: str, rel: str) -> bool:
        if name in self.names:
            return True
        if self.name_re is not None and self.name_re.match(name):
            return True
        return self.rel_re is not None and self.rel_re.match(rel) is not None

    def excluded_rel(self, rel: str) -> bool:
        """Whether a pattern matches the relative path or any of its parents."""
        parts = rel.split("/")
        for i, part in enumerate(parts):
            if self.matches(part, "/".join(parts[: i + 1]) if self.rel_re is not None else part):
                return True
        return False


def _relative(path: str, root: str) -> str | None:
    try:
        return os.path.relpath(path, root).replace(os.sep, "/")
    except ValueError:
        return None


def is_excluded(path: Path, settings: Settings) -> bool:
    rel = _relative(os.path.abspath(path), os.path.abspath(settings.root))
    if rel is None:
        rel = path.as_posix()
    # A pattern excludes a path when it matches the path or any of its parents.
    return _Matcher.of(settings.exclude + settings.extend_exclude).excluded_rel(rel)


class _GitIgnore:
    """The .gitignore files that apply to a folder (its own and its parents')."""

    def __init__(self) -> None:
        self._specs: dict[Path, list[tuple[Path, Any]]] = {}

    def specs_for(self, directory: Path, parent: list[tuple[Path, Any]] | None) -> list[tuple[Path, Any]]:
        cached = self._specs.get(directory)
        if cached is not None:
            return cached
        specs = list(parent or ())
        ignore_file = directory / ".gitignore"
        if ignore_file.is_file():
            try:
                # Guarded like a source: a link to a device or a huge file is refused.
                data = read_source(ignore_file, within=str(repository_root(directory)), limit=MAX_IGNORE_BYTES)
                lines = data.decode("utf-8", errors="replace").splitlines()
                specs.append((directory, (*_compiled(lines), os.path.join(str(directory), ""))))
            except OSError:
                pass
        self._specs[directory] = specs
        return specs

    @staticmethod
    def ignored(path: str, is_dir: bool, specs: list[tuple[Path, Any]]) -> bool:
        """Whether the absolute ``path`` (a string: made for every file, a
        Path is slow) is ignored."""
        result = False
        for base, (spec, anything, prefix) in specs:
            rel = path[len(prefix):] if path.startswith(prefix) else Path(path).relative_to(base).as_posix()
            if os.sep != "/":
                rel = rel.replace(os.sep, "/")
            if is_dir:
                rel += "/"
            if anything is not None and not anything(rel):
                continue
            if spec is None:  # no negation: the match ignores it
                result = True
                continue
            check = spec.check_file(rel) if not isinstance(spec, LinearSpec) else check_file(spec, rel)
            if check.include is not None:
                result = bool(check.include)
        return result


def _compiled(lines: list[str]) -> tuple[Any, Callable[[str], bool] | None]:
    """A .gitignore's pathspec spec and ``_any_pattern`` matcher.  Without
    a negation (``!pattern``) a path is ignored exactly when any pattern
    matches, which the matcher answers alone: the spec (a regex compiled
    per pattern) is then not made, and is None."""
    if any(star_runs(line) >= MAX_STAR_RUNS for line in lines):
        # A regex made from such a line may backtrack for minutes on a
        # name the repository chose: the whole file is matched in linear time.
        return LinearSpec(lines), None
    import pathspec

    factory = _pattern_factory()
    if factory is not None:
        try:
            regexes = [factory.pattern_to_regex(line) for line in lines]
        except Exception:  # a pattern pathspec's own parse would reject too
            regexes = None
        if regexes is not None and all(include is not False for _, include in regexes):
            anything = _any_pattern([(regex, include) for regex, include in regexes])
            if anything is not None:
                return None, anything
    spec = pathspec.GitIgnoreSpec.from_lines(lines)
    return spec, _any_pattern([(p.regex.pattern if p.regex is not None else None, p.include) for p in spec.patterns])


def _pattern_factory() -> Any:
    """The pattern class ``GitIgnoreSpec`` compiles lines with (pathspec 1.x, 0.x)."""
    try:
        from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern
    except ImportError:
        try:
            from pathspec.patterns.gitwildmatch import GitWildMatchPattern
        except ImportError:
            return None
        return GitWildMatchPattern
    return GitIgnoreSpecPattern


def _any_pattern(patterns: list[tuple[Any, bool | None]]) -> Callable[[str], bool] | None:
    """Whether any of the (regex text, include) patterns matches a path, in
    a few regex searches: most paths match none, and that is much cheaper
    than a hundred searches (``check_file`` tries every pattern, for
    negations).  A pattern that may match below any folder (``^(?:.+/)?``
    in front, most of them) is tried at each segment's start without that
    prefix, which a regex engine would otherwise retry at every slash for
    each pattern.  None when the patterns are not plain regexes."""
    try:
        anywhere: list[str] = []
        anchored: list[str] = []
        for text, include in patterns:
            if include is None:
                continue
            if not isinstance(text, str):
                return None
            text = _NAMED_GROUP.sub("(?:", text)
            if text.startswith(_ANYWHERE):
                anywhere.append(text[len(_ANYWHERE):])
            else:
                anchored.append(text)
        below = re.compile("|".join(f"(?:{t})" for t in anywhere)) if anywhere else None
        rooted = re.compile("|".join(f"(?:{t})" for t in anchored)) if anchored else None
    except re.error:
        return None

    def matches(rel: str) -> bool:
        if rooted is not None and rooted.match(rel) is not None:
            return True
        if below is None:
            return False
        start = 0
        while True:
            if below.match(rel, start) is not None:
                return True
            start = rel.find("/", start) + 1
            if start <= 0 or start >= len(rel):
                return False

    return matches


#: pathspec names a group in every pattern; names may not repeat in one regex.
_NAMED_GROUP = re.compile(r"\(\?P<\w+>")
#: How pathspec starts a pattern that matches in any folder.
_ANYWHERE = "^(?:.+/)?"


def _parent_gitignores(directory: Path, cache: _GitIgnore) -> list[tuple[Path, Any]]:
    """.gitignore files from the repository root down to ``directory``."""
    chain: list[Path] = []
    for folder in (directory, *directory.parents):
        chain.append(folder)
        if (folder / ".git").exists():
            break
    else:
        chain = [directory]
    specs: list[tuple[Path, Any]] = []
    for folder in reversed(chain):
        specs = cache.specs_for(folder, specs)
    return specs


def is_force_excluded(path: Path, settings: Settings, cache: _GitIgnore | None = None) -> bool:
    """``--force-exclude`` for a path named explicitly: excluded by the
    configuration, or (with ``respect-gitignore``) ignored by git, itself or
    through a folder above it, as a walk would have skipped it."""
    if is_excluded(path, settings):
        return True
    if not settings.respect_gitignore:
        return False
    cache = cache or _GitIgnore()
    node = Path(os.path.abspath(path))
    while node.parent != node:
        parent = node.parent
        specs = _parent_gitignores(parent, cache)
        if specs and _GitIgnore.ignored(str(node), node.is_dir(), specs):
            return True
        if (parent / ".git").exists():
            return False  # the repository's root: no .gitignore above it applies
        node = parent
    return False


def discover(
    paths: list[Path],
    settings_for: Callable[[Path], Settings],
    *,
    force_exclude: bool = False,
) -> Iterator[Candidate]:
    seen: set[str] = set()
    gitignore = _GitIgnore()
    for root in paths:
        if root.is_dir():
            settings = settings_for(root)
            if force_exclude and is_force_excluded(root, settings, gitignore):
                continue
            yield from _walk(root, settings_for, gitignore, seen)
        else:
            settings = settings_for(root)
            if force_exclude and is_force_excluded(root, settings, gitignore):
                continue
            key = os.path.abspath(root)
            if key not in seen:
                seen.add(key)
                yield Candidate(root, settings, explicit=True)


def _walk(
    root: Path, settings_for: Callable[[Path], Settings], gitignore: _GitIgnore, seen: set[str]
) -> Iterator[Candidate]:
    absolute_root = os.path.abspath(root)
    # A link found in the walk is followed only to a file inside the project.
    # (The folder itself may be a link: the user named it.)
    within = os.path.realpath(project_root(Path(os.path.realpath(absolute_root))))
    settings = settings_for(root)
    specs = _parent_gitignores(Path(absolute_root), gitignore) if settings.respect_gitignore else []
    stack: list[tuple[Path, str, list[tuple[Path, Any]], Settings | None]] = [(root, absolute_root, specs, None)]
    roots: dict[str, str] = {}
    while stack:
        directory, absolute, specs, inherited = stack.pop()
        try:
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError:
            continue  # unreadable or vanished folder: nothing to check there
        # Only a folder holding a configuration file can have settings other
        # than its parent's; asking the resolver for every folder costs a
        # resolve() and a walk up to the root each time.
        if inherited is None or any(entry.name in CONFIG_FILES for entry in entries):
            settings = settings_for(directory)
        else:
            settings = inherited
        matcher = _Matcher.of(settings.exclude + settings.extend_exclude)
        base = roots.get(settings.root)
        if base is None:
            base = roots[settings.root] = os.path.abspath(settings.root)
        rel_dir = _relative(absolute, base)
        # A path is excluded when its folder or its own name matches, so the
        # folder's answer is worked out once for all of its entries.
        if rel_dir is None:
            folder_excluded = False
        elif rel_dir == ".":
            folder_excluded, rel_dir = False, ""
        else:
            folder_excluded = matcher.excluded_rel(rel_dir)
        for entry in entries:
            name = entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = not is_dir and entry.is_file()  # follows links to files; a dangling link is neither
                if is_file and entry.is_symlink() and not is_inside(entry.path, within):
                    continue  # what a link leads to outside the project is not the project's
            except OSError:
                continue
            if not is_dir:
                if not is_file:
                    continue
                extension = name.rsplit(".", 1)[-1] if "." in name else ""
                if extension not in settings.extensions:
                    continue
            path = directory / name
            if rel_dir is None:
                excluded = is_excluded(path, settings)
            else:
                excluded = folder_excluded or matcher.matches(name, f"{rel_dir}/{name}" if rel_dir else name)
            if excluded:
                continue
            child_abs = os.path.join(absolute, name)
            if is_dir:
                if specs and gitignore.ignored(child_abs, True, specs):
                    continue
                child_specs = gitignore.specs_for(Path(child_abs), specs) if settings.respect_gitignore else []
                stack.append((path, child_abs, child_specs, settings))
            else:
                if specs and gitignore.ignored(child_abs, False, specs):
                    continue
                if child_abs in seen:
                    continue
                seen.add(child_abs)
                yield Candidate(path, settings, explicit=False, within=within)
