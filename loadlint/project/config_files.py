"""YAML configuration beside the code: the values Hydra's primary config
(``@hydra.main(config_path="conf", config_name="config")``) or
``OmegaConf.load("config.yaml")`` gives a name, joined into the module's
rules.

Phase 1 lists the files a module reads into names (``config_files`` in its
summary, ``loadlint.facts.configs.ConfigRead``).  Here each is read inside
the project (``read_source``: never outside the root), parsed by the safe
subset reader (``loadlint.sources.yaml_subset``), and its plain values are
bound to the name; the module is analysed again, and what is new is
reported with where the value comes from (``data.num_workers: 8`` from
conf/config.yaml:7).  A value is a default the command line may override
(Hydra's ``data.num_workers=2``), as an ``argparse`` default is.

Unknown, so silent: a file missing, not in the subset, either place a
relative path may mean outside the project (never looked at, so whether a
file is there changes nothing), or found at both places ``OmegaConf.load``'s relative path may mean (the
script's folder and the project root) with different contents; a Hydra
config whose ``defaults`` list does not end with ``_self_`` (the groups it
composes may override its values); a key assigned anywhere in the project
(``cfg.data.num_workers = 4``, matched on its last two parts) or named in
a string (``"data.num_workers"``).
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, cast

from loadlint.engine.analysis import analyse
from loadlint.project.modules import shown_path
from loadlint.sources.boundary import is_inside
from loadlint.sources.files import read_source
from loadlint.sources.yaml_subset import MAX_BYTES, Mapping, Scalar, Unknown, parse
from loadlint.types import Descriptor, Finding, Options, Summary

#: Project files searched for writes to a config key, at most.
MAX_SCAN = 20000
_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "venv", "env", "build", "dist"})


def candidates(path: str, read: dict[str, Any], root: Path) -> list[str]:
    """Where a module's config file may be: beside the script for Hydra;
    for ``OmegaConf.load`` (relative to the folder the script runs from),
    beside the script or at the project root."""
    file = read.get("file")
    if not isinstance(file, str) or os.path.isabs(file):
        return []
    places = [os.path.normpath(os.path.join(os.path.dirname(path), file))]
    if read.get("kind") == "load":
        places.append(os.path.normpath(os.path.join(root, file)))
    places = list(dict.fromkeys(places))
    # A place outside may hold a file, unknowable: the read is unknown (as
    # when the two places hold different files), whatever is there.
    return places if _all_inside(places, root) else []


def _all_inside(places: list[str], root: Path) -> bool:
    """Every place inside the project, refused as ``extend`` is: one that
    climbs out is refused before anything looks at any of them (no stat, no
    open); a link inside counts where it leads."""
    base = os.path.abspath(root)
    spelled = [os.path.abspath(place) for place in places]
    try:
        if any(os.path.commonpath([base, place]) != base for place in spelled):
            return False
    except ValueError:  # another drive
        return False
    return all(is_inside(place, base) for place in spelled)


def files_read(summaries: dict[str, Summary], root: Path) -> list[str]:
    """Every config file the summaries' modules may read (for the project's cache key)."""
    out: list[str] = []
    for path, summary in sorted(summaries.items()):
        for read in summary.get("config_files", ()):
            if isinstance(read, dict):
                out.extend(candidates(path, read, root))
    return sorted(set(out))


class ConfigFiles:
    """Reads and parses config files once per project run."""

    def __init__(self, root: Path, read_text: Callable[[str], str | None]) -> None:
        self.root = root
        self.read_text = read_text
        self._parsed: dict[str, tuple[bytes, Mapping] | None] = {}
        self._index: _Writes | None = None

    def _load(self, file: str) -> tuple[bytes, Mapping] | None:
        if file not in self._parsed:
            found = None
            try:
                data = read_source(file, within=str(self.root), limit=MAX_BYTES)
                tree = parse(data.decode("utf-8-sig"))
                found = None if tree is None else (data, tree)
            except (OSError, UnicodeDecodeError):
                pass
            self._parsed[file] = found
        return self._parsed[file]

    def values(self, path: str, summary: Summary) -> dict[str, dict[str, Any]]:
        """The bindings for ``path``'s config reads: ``"main\0cfg"`` -> dotted key -> value and text."""
        out: dict[str, dict[str, Any]] = {}
        for read in summary.get("config_files", ()):
            if not isinstance(read, dict):
                continue
            existing = [f for f in candidates(path, read, self.root) if os.path.isfile(f)]
            loaded = [found for found in (self._load(f) for f in existing) if found is not None]
            if not loaded or len(loaded) != len(existing) or len({data for data, _ in loaded}) != 1:
                continue  # missing, unreadable, or two different files it may mean
            file, tree = existing[0], loaded[0][1]
            if read.get("kind") == "hydra" and not _self_last(tree):
                continue
            options = {}
            for dotted, scalar in _leaves(tree, ()):
                if self._written(tuple(dotted.split("."))):
                    continue
                shown = f"{shown_path(file)}:{scalar.line}"
                options[dotted] = {"value": scalar.value, "text": f"the default `{dotted}: {scalar.value!r}` from {shown}"}
            if options:
                out[f"{read.get('scope')}\0{read.get('name')}"] = options
        return out

    def _written(self, parts: tuple[str, ...]) -> bool:
        """A project module assigns the key (its last one or two parts:
        ``cfg.data.num_workers = 4``) or names it in a string (``"data.num_workers"``)."""
        if self._index is None:
            self._index = _Writes(self.root)
        index = self._index
        if index.incomplete or ".".join(parts) in index.strings:
            return True
        return parts[-2:] in index.pairs if len(parts) > 1 else parts[-1] in index.singles


_OPERATOR = r"[ \t]*(?::[^=\n.:]{0,60})?(?:\*\*|//|>>|<<|[-+*/%@&|^])?=(?!=)"
_PAIR = re.compile(rb"\.[ \t]*(\w+)[ \t]*\.[ \t]*(\w+)" + _OPERATOR.encode())
_SINGLE = re.compile(rb"\.[ \t]*(\w+)" + _OPERATOR.encode())
_STRING = re.compile(rb"['\"]([A-Za-z_][\w.]*)['\"]")


class _Writes:
    """The attribute writes and dotted strings of every project module, in one pass."""

    def __init__(self, root: Path) -> None:
        self.pairs: set[tuple[str, ...]] = set()
        self.singles: set[str] = set()
        self.strings: set[str] = set()
        self.incomplete = False
        count = 0
        for folder, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
            for name in sorted(names):
                if not name.endswith((".py", ".ipynb")):
                    continue
                count += 1
                if count > MAX_SCAN:
                    self.incomplete = True  # not all read: assume a write is there
                    return
                try:
                    data = read_source(os.path.join(folder, name), within=str(root))
                except OSError:
                    continue
                self.pairs.update((a.decode(), b.decode()) for a, b in _PAIR.findall(data))
                self.singles.update(a.decode() for a in _SINGLE.findall(data))
                self.strings.update(a.decode() for a in _STRING.findall(data) if b"." in a)


def _self_last(tree: Mapping) -> bool:
    """A Hydra primary config without a defaults list, or whose list ends
    with ``_self_``: its own values win over what the list composes."""
    defaults = tree.get("defaults")
    if defaults is None:
        return True
    items = defaults.items if isinstance(defaults, Unknown) else None
    return bool(items) and items is not None and items[-1] == "_self_"


def _leaves(tree: Mapping, prefix: tuple[str, ...]) -> Iterator[tuple[str, Scalar]]:
    for key, node in tree.items():
        if prefix == () and key == "defaults":
            continue
        if isinstance(node, dict):
            yield from _leaves(node, (*prefix, key))
        elif isinstance(node, Scalar) and (node.value is None or type(node.value) in (int, float, str, bool)):
            yield ".".join((*prefix, key)), node


def config_findings(
    path: str, text: str, given: dict[str, dict[str, Any]], options: Options, baseline: list[Finding] | None,
) -> list[Finding]:
    """The findings of ``path`` that appear once its config files' values are bound."""
    # Imported here: the facts import libcst, which a run served from the cache never needs.
    from loadlint.facts.configs import CONFIG_FILES

    if baseline is None:
        baseline, _ = analyse(text, path, options)
    before = {(f.code, f.location.row, f.location.column) for f in baseline}
    # The config reads' bindings nest one level deeper than a function's (scope and name -> key -> value).
    after, _ = analyse(text, path, options, bindings={CONFIG_FILES: cast(dict[str, Descriptor], given)})
    out = []
    for finding in after:
        if (finding.code, finding.location.row, finding.location.column) in before:
            continue
        finding = dataclasses.replace(finding)
        # A fix would write the value into the code and lose the file's.
        finding.fix = None
        out.append(finding)
    return out


def project_config_findings(
    root: Path,
    summaries: Iterable[tuple[str, Summary]],
    read_text: Callable[[str], str | None],
    options: Callable[[str], Options],
    own_findings: Callable[[str], list[Finding] | None],
) -> dict[str, list[Finding]]:
    """New findings, by path, of the modules that read config files."""
    files = ConfigFiles(root, read_text)
    out: dict[str, list[Finding]] = {}
    for path, summary in summaries:
        if not summary.get("config_files") or path.endswith(".ipynb"):
            continue
        given = files.values(path, summary)
        text = read_text(path) if given else None
        if text is not None:
            found = config_findings(path, text, given, options(path), own_findings(path))
            if found:
                out[path] = found
    return out
