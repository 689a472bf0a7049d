"""Configuration: ``[tool.loadlint]`` in pyproject.toml, or ``loadlint.toml`` /
``.loadlint.toml`` (same keys, no prefix), merged with command-line flags.

As in ruff, the closest configuration file above a path wins and files are
not merged unless one says ``extend = "<path>"``.  Every error is a
``ConfigError`` whose message is one line naming the file and the key.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable

from loadlint.sources.boundary import is_inside, repository_root
from loadlint.sources.files import read_source
from loadlint.rules import CODES, DEFAULT_OFF, codes_where
from loadlint.types import Target


def _tomllib() -> ModuleType:
    # Imported on the first configuration file that needs parsing: most
    # runs find none, or a pyproject.toml without [tool.loadlint].
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    module: ModuleType = tomllib
    return module


CONFIG_FILES = (".loadlint.toml", "loadlint.toml", "pyproject.toml")
OUTPUT_FORMATS = ("full", "concise", "json", "json-lines", "sarif", "github", "gitlab", "junit", "pylint")
DEFAULT_EXCLUDES = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache",
    ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache", ".loadlint_cache", ".svn",
    ".tox", ".venv", ".vscode", "__pypackages__", "_build", "buck-out", "build", "dist", "node_modules",
    "site-packages", "venv",
)


class ConfigError(Exception):
    """A configuration problem: exit 2 with this one-line message."""


@dataclass(frozen=True)
class Settings:
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDES
    extend_exclude: tuple[str, ...] = ()
    respect_gitignore: bool = True
    unsafe_fixes: bool = False
    #: Whether the performance codes are reported in test files.
    performance_in_tests: bool = False
    output_format: str | None = None
    target: Target = Target()
    extensions: tuple[str, ...] = ("py", "pyi", "ipynb")
    #: Directory the config file lives in (relative patterns are resolved there).
    root: str = "."
    source: str | None = None

    def codes(self) -> frozenset[str]:
        # Expanded once per settings (so once per run and configuration):
        # a configuration may list hundreds of thousands of selectors.
        cached: frozenset[str] | None = self.__dict__.get("_codes")
        if cached is None:
            cached = resolve_selection(self.select, self.ignore, self.extend_select, self.source or "--select")
            object.__setattr__(self, "_codes", cached)
        return cached

    def _ignored(self) -> tuple[tuple[str, frozenset[str]], ...]:
        """``per_file_ignores`` with each pattern's codes expanded, once."""
        cached: tuple[tuple[str, frozenset[str]], ...] | None = self.__dict__.get("_ignored_codes")
        if cached is None:
            source = self.source or "per-file-ignores"
            cached = tuple((pattern, expand(ignored, source)) for pattern, ignored in self.per_file_ignores)
            object.__setattr__(self, "_ignored_codes", cached)
        return cached

    def codes_for(self, path: str) -> frozenset[str]:
        codes = self.codes()
        if not self.per_file_ignores and self.performance_in_tests:
            return codes
        rel = _relative(path, self.root)
        if not self.performance_in_tests and is_test_file(rel):
            # A test's loader is sized for the test, not for training speed.
            codes = codes - codes_where(in_tests=False)
        if not self.per_file_ignores:
            return codes
        absolute = os.path.abspath(path).replace(os.sep, "/")
        for pattern, ignored in self._ignored():
            if _glob_match(absolute if os.path.isabs(pattern) else rel, pattern):
                codes = codes - ignored
        return codes

    def fingerprint(self, path: str) -> str:
        """What a cached result depends on, for this path."""
        return repr((sorted(self.codes_for(path)), tuple(sorted(self.target.items()))))


#: Folders whose files are tests, and test files' names, as pytest and unittest find them.
TEST_FOLDERS = frozenset({"test", "tests", "testing"})
_TEST_NAME = re.compile(r"^(?:test_.*|.*_test|tests?|conftest)\.(?:py|pyi|ipynb)$")


def is_test_file(rel: str) -> bool:
    """A test: a file under a ``test``/``tests``/``testing`` folder (below
    the configuration's folder) or named ``test_*.py``, ``*_test.py``,
    ``test.py``, ``tests.py`` or ``conftest.py``."""
    parts = rel.split("/")
    return bool(_TEST_NAME.match(parts[-1])) or any(part in TEST_FOLDERS for part in parts[:-1])


def _relative(path: str, root: str) -> str:
    try:
        return os.path.relpath(path, root).replace(os.sep, "/")
    except ValueError:
        return path.replace(os.sep, "/")


def _glob_match(rel: str, pattern: str) -> bool:
    pattern = pattern.replace(os.sep, "/")
    if fnmatch.fnmatchcase(rel, pattern):
        return True
    # A pattern without a slash matches the file name anywhere, as in ruff.
    return "/" not in pattern and fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], pattern)


def expand(selectors: Iterable[str], source: str) -> frozenset[str]:
    """Codes matched by selectors: full codes, prefixes (``LL2``) or ``ALL``."""
    out: set[str] = set()
    seen: set[str] = set()
    for raw in selectors:
        selector = raw.strip().upper()
        if not selector or selector in seen:  # each distinct selector once: a list may repeat one 300k times
            continue
        seen.add(selector)
        if selector == "ALL":
            out |= set(CODES)
            continue
        matched = {code for code in CODES if code.startswith(selector)}
        if not matched:
            raise ConfigError(f"{source}: unknown rule selector '{raw.strip()}' (codes look like LL201, prefixes like LL2, or ALL)")
        out |= matched
    return frozenset(out)


def resolve_selection(
    select: Iterable[str], ignore: Iterable[str], extend_select: Iterable[str], source: str = "--select"
) -> frozenset[str]:
    select = tuple(select)
    chosen = expand(select, source) if select else frozenset(CODES) - DEFAULT_OFF
    chosen |= expand(extend_select, source)
    return chosen - expand(ignore, source)


# -- files ---------------------------------------------------------------

_KEYS = {
    "select", "ignore", "extend-select", "per-file-ignores", "exclude", "extend-exclude",
    "respect-gitignore", "unsafe-fixes", "output-format", "target", "extend", "extension", "performance-in-tests",
}


def find_config(start: Path) -> Path | None:
    """The closest configuration file at or above ``start`` that configures loadlint."""
    directory = start if start.is_dir() else start.parent
    directory = directory.resolve()
    for folder in (directory, *directory.parents):
        for name in CONFIG_FILES:
            candidate = folder / name
            if not candidate.exists():
                continue
            if name == "pyproject.toml" and not _has_tool_section(candidate):
                continue
            return candidate
    return None


def _has_tool_section(path: Path) -> bool:
    within = str(repository_root(path.parent))
    if not is_inside(os.path.realpath(path), within, resolved=True):
        return False  # a pyproject.toml linked out of its repository is not the repository's
    # Unreadable, it may configure loadlint: skipping it would run with settings nobody wrote.
    try:
        data = read_source(path, within=within, limit=MAX_CONFIG_BYTES)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    if b"tool.loadlint" not in data and b"[tool]" not in data:
        return False
    tomllib = _tomllib()
    try:
        return "loadlint" in tomllib.loads(data.decode("utf-8")).get("tool", {})
    # ValueError too: an integer beyond Python's digit limit is not a TOMLDecodeError.
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses per level of nested arrays and tables
        raise ConfigError(f"{path}: invalid TOML: nested too deeply") from None


#: The most bytes of one configuration file read.
MAX_CONFIG_BYTES = 4 * 1024 * 1024


def load_table(path: Path) -> dict[str, Any]:
    tomllib = _tomllib()
    try:
        data = tomllib.loads(read_source(path, limit=MAX_CONFIG_BYTES).decode("utf-8"))
    # ValueError too: an integer beyond Python's digit limit is not a TOMLDecodeError.
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses per level of nested arrays and tables
        raise ConfigError(f"{path}: invalid TOML: nested too deeply") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("loadlint", {})
    else:
        table = data.get("tool", {}).get("loadlint", data) if "tool" in data else data
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.loadlint] must be a table")
    return table


def load_settings(path: Path, _seen: tuple[Path, ...] = (), *, trusted: bool = False, _within: str | None = None) -> Settings:
    """Settings from one configuration file (following ``extend``).

    A configuration found in the checked tree came with the repository:
    its ``extend`` chain stays inside that project, so a repository cannot
    make loadlint read (or tell whether there is) a file elsewhere.  One the
    user names (``--config``, ``trusted``) may extend any file."""
    if not trusted and _within is None:
        _within = str(repository_root(Path(os.path.abspath(path)).parent))
        if not is_inside(str(path), _within):
            raise ConfigError(f"{path}: the configuration is a link leading outside the project")
    path = path.resolve()
    if path in _seen:
        raise ConfigError(f"{path}: circular 'extend'")
    table = load_table(path)
    base = Settings()
    if "extend" in table:
        parent = table["extend"]
        if not isinstance(parent, str):
            raise ConfigError(f"{path}: 'extend' must be a path string")
        parent_path = (path.parent / os.path.expanduser(parent)).resolve()
        if _within is not None and not is_inside(str(parent_path), _within):
            raise ConfigError(f"{path}: 'extend' points outside the project; pass that file with --config instead")
        if not parent_path.is_file():
            raise ConfigError(f"{path}: 'extend' points to a missing file: {parent}")
        base = load_settings(parent_path, (*_seen, path), trusted=trusted, _within=_within)
    return apply_table(base, table, path)


def _str_list(value: Any, key: str, source: Path) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{source}: '{key}' must be a list of strings, not {value!r}")
    return tuple(value)


def _anchor(pattern: str, directory: Path) -> str:
    """A pattern with a folder part is relative to the file that defines it,
    so that it keeps its meaning when another config extends this one."""
    if "/" not in pattern.replace(os.sep, "/") or os.path.isabs(pattern):
        return pattern
    return (directory / pattern).as_posix()


def layer_selection(
    base: Settings,
    select: tuple[str, ...] | None,
    ignore: tuple[str, ...] | None,
    extend_select: tuple[str, ...] | None,
) -> dict[str, tuple[str, ...]]:
    """Stack one layer of selection on ``base``, as ruff does for an extended
    config and for the command line: a ``select`` starts over (the earlier
    ignores no longer apply); otherwise ``extend-select`` re-enables codes an
    earlier layer ignored, and ``ignore`` adds to the earlier ignores."""
    if select is not None:
        return {"select": select, "ignore": ignore or (), "extend_select": extend_select or ()}
    out: dict[str, tuple[str, ...]] = {}
    earlier_ignore = base.ignore
    if extend_select:
        added = expand(extend_select, "extend-select")
        if earlier_ignore and expand(earlier_ignore, "ignore") & added:
            earlier_ignore = tuple(sorted(expand(earlier_ignore, "ignore") - added))
        out["extend_select"] = base.extend_select + extend_select
    out["ignore"] = earlier_ignore + (ignore or ())
    return out


def apply_table(base: Settings, table: dict[str, Any], source: Path) -> Settings:
    for key in table:
        if key not in _KEYS:
            allowed = ", ".join(sorted(_KEYS))
            raise ConfigError(f"{source}: unknown key '{key}' in [tool.loadlint] (allowed: {allowed})")
    changes: dict[str, Any] = {"root": str(source.parent), "source": str(source)}
    layer: dict[str, tuple[str, ...]] = {}
    for key in ("select", "ignore", "extend-select"):
        if key in table:
            values = _str_list(table[key], key, source)
            expand(values, f"{source}: '{key}'")
            layer[key] = values
    if layer:
        changes.update(layer_selection(base, layer.get("select"), layer.get("ignore"), layer.get("extend-select")))
    for key in ("exclude", "extend-exclude"):
        if key in table:
            changes[key.replace("-", "_")] = _str_list(table[key], key, source)
    if "extend-exclude" in table:
        changes["extend_exclude"] = base.extend_exclude + changes["extend_exclude"]
    if "per-file-ignores" in table:
        pfi = table["per-file-ignores"]
        if not isinstance(pfi, dict):
            raise ConfigError(f"{source}: 'per-file-ignores' must be a table of glob = [codes]")
        entries = []
        for pattern, codes in pfi.items():
            codes = _str_list(codes, f"per-file-ignores.{pattern}", source)
            expand(codes, f"{source}: 'per-file-ignores'")
            entries.append((_anchor(pattern, source.parent), codes))
        changes["per_file_ignores"] = tuple(entries)
    for key in ("respect-gitignore", "unsafe-fixes", "performance-in-tests"):
        if key in table:
            if not isinstance(table[key], bool):
                raise ConfigError(f"{source}: '{key}' must be true or false, not {table[key]!r}")
            changes[key.replace("-", "_")] = table[key]
    if "output-format" in table:
        value = table["output-format"]
        if value not in OUTPUT_FORMATS:
            raise ConfigError(f"{source}: 'output-format' must be one of {', '.join(OUTPUT_FORMATS)}, not {value!r}")
        changes["output_format"] = value
    if "extension" in table:
        values = _str_list(table["extension"], "extension", source)
        changes["extensions"] = tuple(v.lstrip(".") for v in values)
    if "target" in table:
        from loadlint.hardware.detect import DETECT, TargetError, detected_target, validate_target

        if table["target"] == DETECT:
            # This machine, declared where everyone reads it (already valid).
            target = detected_target()
        elif not isinstance(table["target"], dict):
            raise ConfigError(f"{source}: [tool.loadlint.target] must be a table, or target = \"detect\"")
        else:
            try:
                target = validate_target(table["target"], f"{source}: [tool.loadlint.target]")
            except TargetError as exc:
                raise ConfigError(str(exc)) from None
        changes["target"] = target.over(base.target)
    return replace(base, **changes)


@dataclass
class Overrides:
    """Command-line flags; None means "not given" (the config decides)."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] | None = None
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] | None = None
    respect_gitignore: bool | None = None
    unsafe_fixes: bool | None = None
    output_format: str | None = None
    target: Target = Target()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] | None = None
    #: ``verify`` sets it: a script the user asks to measure is no test to spare.
    performance_in_tests: bool | None = None

    def apply(self, settings: Settings) -> Settings:
        changes: dict[str, Any] = {}
        if self.select is not None or self.ignore is not None or self.extend_select is not None:
            changes.update(layer_selection(settings, self.select, self.ignore, self.extend_select))
        if self.exclude is not None:
            changes["exclude"] = self.exclude
        if self.extend_exclude is not None:
            changes["extend_exclude"] = settings.extend_exclude + self.extend_exclude
        for name in ("respect_gitignore", "unsafe_fixes", "output_format", "per_file_ignores", "performance_in_tests"):
            value = getattr(self, name)
            if value is not None:
                changes[name] = value
        if self.target:
            changes["target"] = self.target.over(settings.target)
        return replace(settings, **changes) if changes else settings


class ConfigResolver:
    """Finds the settings for each file: the closest config, then the flags.

    Loaded files are cached per directory, so a tree of thousands of files
    reads each configuration once.
    """

    def __init__(self, overrides: Overrides, config: Path | None = None, isolated: bool = False) -> None:
        self.overrides = overrides
        self.fixed: Settings | None = None
        if isolated:
            self.fixed = overrides.apply(Settings(root=os.getcwd()))
        elif config is not None:
            self.fixed = overrides.apply(load_settings(config, trusted=True))
        self._by_dir: dict[Path, Settings] = {}
        self._by_file: dict[Path, Settings] = {}

    def for_path(self, path: Path) -> Settings:
        if self.fixed is not None:
            return self.fixed
        directory = (path if path.is_dir() else path.parent).resolve()
        cached = self._by_dir.get(directory)
        if cached is not None:
            return cached
        config = find_config(directory)
        if config is None:
            settings = self.overrides.apply(Settings(root=os.getcwd()))
        else:
            loaded = self._by_file.get(config)
            if loaded is None:
                loaded = self._by_file[config] = self.overrides.apply(load_settings(config))
            settings = loaded
        self._by_dir[directory] = settings
        return settings


def describe(path: Path, settings: Settings) -> str:
    """``--show-settings``: the resolved configuration for one file, as TOML
    a user could paste into ``[tool.loadlint]`` (plus where it came from)."""

    def toml(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return str(value)
        if isinstance(value, str):
            return json.dumps(value)
        if value is None:
            return '"" # (not set)'
        return "[" + ", ".join(toml(v) for v in value) + "]"

    lines = [
        f"# Resolved settings for: {path}",
        f"# Settings path: {settings.source or '(none: defaults)'}",
        f"# Enabled rules: {', '.join(sorted(settings.codes_for(str(path)))) or '(none)'}",
        "[tool.loadlint]",
    ]
    for name in ("select", "ignore", "extend-select", "exclude", "extend-exclude", "respect-gitignore",
                 "unsafe-fixes", "performance-in-tests", "output-format", "extension"):
        attr = "extensions" if name == "extension" else name.replace("-", "_")
        value = getattr(settings, attr)
        if name == "output-format" and value is None:
            continue
        note = "  # empty: the rules that are on by default" if name == "select" and not value else ""
        lines.append(f"{name} = {toml(value)}{note}")
    lines.append("")
    lines.append("[tool.loadlint.per-file-ignores]")
    for pattern, codes in settings.per_file_ignores:
        lines.append(f"{json.dumps(pattern)} = {toml(codes)}")
    lines.append("")
    lines.append("[tool.loadlint.target]")
    for key, value in sorted(settings.target.items()):
        lines.append(f"{key} = {_size(int(value)) if key in ('memory', 'shm') else toml(value)}")
    return "\n".join(lines)


def _size(value: int) -> str:
    """A size as the file writes it: a bare number is GiB (``memory = 23``),
    exactly, else MiB or bytes with their unit."""
    for unit, scale in (("", 2**30), ("MiB", 2**20)):
        if value % scale == 0:
            return str(value // scale) if not unit else json.dumps(f"{value // scale}{unit}")
    return json.dumps(f"{value}B")
