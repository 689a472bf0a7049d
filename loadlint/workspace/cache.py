"""The result cache: ``.loadlint_cache/`` as ruff keeps ``.ruff_cache/``.

A file's findings depend on its bytes, on loadlint itself, on the effective
configuration for that path (selected codes, target) and, for some rules, on
the hardware profile.  An entry records all of them and is used only when
every one matches; anything else (a corrupt, truncated or foreign file, an
entry written by another version) is a miss, and the entry is rewritten.
Nothing read from the cache is trusted beyond what it is checked against: it
is JSON, validated field by field, never unpickled (``workspace.entries``).

Layout::

    .loadlint_cache/
        CACHEDIR.TAG            backup tools skip the folder
        .gitignore              "*": never committed
        <version>/<hash>.json   one entry per (path, configuration)

Entries are named after the path and configuration, not the content, so an
edited file replaces its entry instead of adding one.  A folder that cannot
be created or written (read-only checkout, full disk) turns writing off for
the run without a word: the cache only ever saves time.

A repository may commit a ``.loadlint_cache`` of its own, so the folder is
never trusted to be what it seems: a folder that is a link, or that another
user owns, is refused (one line on stderr, the run goes on without a
cache); no link inside it is followed, for reading or writing; temporary
files get random names and are created exclusively, so a planted name makes
the write fail rather than follow; the marker files are created the same
way, never after an existence test.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import shutil
import stat
import sys
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable

import loadlint
from loadlint import __version__
from loadlint.cst.gate import libcst_version
from loadlint.sources.boundary import project_root
from loadlint.sources.source import visible
from loadlint.types import Finding, HardwareProfile, Summary
from loadlint.workspace.entries import Entry, entry_json, expect, finding_to_json, parse_entry, read_finding

DEFAULT_DIR = ".loadlint_cache"


def default_dir(start: Path | None = None) -> Path:
    """The cache of the project ``start`` (default: the current folder) is
    in: one per project at its root, wherever inside it loadlint runs."""
    return project_root(start or Path.cwd()) / DEFAULT_DIR

CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by loadlint.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)


#: The record of files the pre-filter turned away (``Cache.turned_away``).
TURNED_AWAY = "turned-away.record"  # not .json: the per-file entries are *.json


def signature(path: str) -> list[int] | None:
    """What says a file is unchanged without reading it: size, modification
    time in nanoseconds, inode and device, of what a link leads to (a link
    turned elsewhere changes them).  None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev]


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=20).hexdigest()


def profile_key(profile: HardwareProfile) -> str:
    """The profile as far as findings can depend on it.

    Available memory changes from one second to the next; keeping it would
    make every entry that consulted the profile a miss.
    """
    # ``declared`` is a frozenset: its repr's order changes with each
    # process's string hashing, so it is written sorted.
    stable = replace(profile, memory_available=None, declared=frozenset())
    return content_hash(repr((stable, sorted(profile.declared))).encode())


def code_stamp() -> str:
    """The loadlint release plus the size and mtime of its modules.

    A development checkout keeps one version number while its rules change;
    the stamp keeps a cache written by yesterday's code from answering for
    today's.  Costs one ``stat`` per module.
    """
    package = os.path.dirname(os.path.abspath(loadlint.__file__))
    # A libcst upgrade changes what parses and how fast paths behave.
    parts = [__version__, f"libcst {libcst_version()}"]
    for folder, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                try:
                    st = os.stat(os.path.join(folder, name))
                except OSError:
                    continue
                parts.append(f"{os.path.relpath(os.path.join(folder, name), package)}:{st.st_size}:{st.st_mtime_ns}")
    return content_hash("\n".join(parts).encode())


class Cache:
    """Lookups and stores for one run.  Never raises for a cache problem."""

    def __init__(self, directory: Path | str, stamp: str | None = None) -> None:
        self.root = Path(directory)
        self.folder = self.root / __version__
        self.stamp = stamp if stamp is not None else code_stamp()
        self.writable = True
        self._prepared = False
        #: False once the folder was refused: nothing is read from it either.
        self.usable = True
        self._checked = False
        self.hits = 0
        self.misses = 0
        #: The entries' file suffix.
        self.suffix = ".json"

    # -- keys ------------------------------------------------------------

    @staticmethod
    def entry_name(path: str, fingerprint: str) -> str:
        # A name that is not UTF-8 holds lone surrogates; any other keeps the key it always had.
        return content_hash(f"{os.path.abspath(path)}\0{fingerprint}".encode("utf-8", "surrogatepass")) + ".json"

    # -- reading ---------------------------------------------------------

    def _name(self, path: str, fingerprint: str) -> str:
        return self.entry_name(path, fingerprint).removesuffix(".json") + self.suffix

    def load(self, path: str, fingerprint: str, digest: str) -> Entry | None:
        """The entry for this path and configuration if it is for these bytes."""
        try:
            raw = self.read(self._name(path, fingerprint))
        except OSError:
            self.misses += 1
            return None
        entry = parse_entry(raw, path, fingerprint, digest, self.stamp)
        if entry is None:
            self.misses += 1
        return entry

    # -- writing ---------------------------------------------------------

    def store(
        self, path: str, fingerprint: str, digest: str, profile: str | None, findings: list[Finding],
        summary: Summary | None = None, cells: dict[int, str] | None = None,
    ) -> None:
        if not self.writable:
            return
        entry = entry_json(path, fingerprint, digest, self.stamp, profile, findings, summary, cells)
        self.write(self._name(path, fingerprint), entry)

    # -- files the pre-filter turned away --------------------------------

    def turned_away(self) -> dict[str, list[int]]:
        """The record ``TurnedAway`` keeps (absolute path -> ``signature``),
        read once per run (a fix run's passes share it)."""
        if self._turned_away is None:
            try:
                raw = json.loads(self.read(TURNED_AWAY))
            except Exception:  # any record, however crafted, is a miss (deep nesting: RecursionError)
                raw = None
            files = raw.get("files") if isinstance(raw, dict) and raw.get("stamp") == self.stamp else None
            self._turned_away = files if isinstance(files, dict) else {}
        return self._turned_away

    def store_turned_away(self, files: dict[str, list[int]]) -> None:
        self._turned_away = files
        self.write(TURNED_AWAY, json.dumps({"stamp": self.stamp, "files": files}, separators=(",", ":")).encode())

    _turned_away: dict[str, list[int]] | None = None

    def sub(self, name: str) -> Cache:
        """A cache kept in a folder of this one (project analysis keeps its
        entries apart from the per-file ones)."""
        sub = Cache(self.folder / name, stamp=self.stamp)
        # Another suffix: tools that read the per-file entries never meet these.
        sub.suffix = ".pjson"
        sub.usable = self._check()
        sub.writable = self.writable and sub.usable
        # Its own folders are checked on its first use, below this one's.
        sub.outer = self
        return sub

    #: The cache this one is a folder of (``sub``), whose checks come first.
    outer: Cache | None = None

    def read(self, name: str) -> bytes:
        """An entry's bytes: never through a link, never a FIFO or device."""
        if not self._check():
            raise OSError(errno.EACCES, "cache folder refused")
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(self.folder / name, flags)
        with os.fdopen(fd, "rb") as handle:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise OSError(errno.EINVAL, "not a regular file")
            if st.st_size > MAX_ENTRY_BYTES:
                raise OSError(errno.EFBIG, "cache entry too large")
            return handle.read(MAX_ENTRY_BYTES)

    def write(self, name: str, data: bytes) -> None:
        """Write an entry of the cache folder atomically (never raises)."""
        if not self.writable:
            return
        target = self.folder / name
        # A random name, created exclusively: an entry or link planted under
        # a name we would pick makes the open fail instead of writing through it.
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
        try:
            self._prepare()
            # Written aside and renamed over, so a reader (or a second run
            # writing the same entry) never sees half of one.  The rename
            # replaces a link at the target; it never writes through one.
            _create(tmp, data)
            os.replace(tmp, target)
        except OSError:
            self.writable = False
            try:
                os.unlink(tmp)
            except OSError:
                pass

    def _check(self) -> bool:
        """Whether the folders that exist are real folders of this user
        (checked once; a refusal is said once, on stderr)."""
        if self._checked:
            return self.usable
        self._checked = True
        if self.outer is not None and not self.outer._check():
            self.usable = self.writable = False
            return False
        for folder in (self.root, self.folder):
            problem = _refusal(folder)
            if problem is not None:
                self.usable = self.writable = False
                if self.outer is None:
                    # The folder's path may hold a name the repository chose.
                    print(f"loadlint: warning: {visible(problem)}; running without a cache", file=sys.stderr)
                return False
        return True

    def _prepare(self) -> None:
        if self._prepared:
            return
        if not self._check():
            raise OSError(errno.EACCES, "cache folder refused")
        if self.outer is None:
            # Where the user put the cache (--cache-dir): its parents are theirs.
            os.makedirs(self.root.parent, exist_ok=True)
        for folder in (self.root, self.folder):
            try:
                os.mkdir(folder, 0o755)
            except FileExistsError:
                pass
            # Made or already there: it must still be a real folder of ours
            # (a link could have been swapped in between).
            problem = _refusal(folder)
            if problem is not None:
                raise OSError(errno.EACCES, problem)
        if self.outer is None:
            # Created exclusively, by name, with their content: an existing
            # file, folder or link (dangling or not) under the name is left
            # alone rather than followed.
            for name, text in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", "# Automatically created by loadlint.\n*\n")):
                try:
                    _create(self.root / name, text.encode())
                except FileExistsError:
                    pass
        self._prepared = True


#: The largest cache entry read (an entry is a file's findings and summary).
MAX_ENTRY_BYTES = 64 * 1024 * 1024


def lazy_cache(directory: str | Path | None) -> Callable[[], Cache]:
    """The cache, opened on first use (opening it stats loadlint's own
    modules for the code stamp)."""
    opened: list[Cache] = []

    def get() -> Cache:
        if not opened:
            opened.append(Cache(directory or default_dir()))
        return opened[0]

    return get


class TurnedAway:
    """The files the pre-filter turned away in earlier runs: a warm run
    skips one whose ``signature`` is unchanged without reading it (most
    files of a repository never mention ``DataLoader``; reading them was
    half of a warm run)."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.before = cache.turned_away()
        self.now: dict[str, list[int]] = {}
        self.signatures: dict[str, list[int] | None] = {}

    def still(self, path: str) -> bool:
        """Whether ``path`` was turned away and is unchanged since.  Its
        signature is taken here, before the file is read: a change made
        after it is seen by the next run."""
        key, sig = os.path.abspath(path), signature(path)
        self.signatures[key] = sig
        if sig is not None and self.before.get(key) == sig:
            self.now[key] = sig
            return True
        return False

    def add(self, path: str) -> None:
        """``path``, asked about with ``still``, was read and turned away."""
        sig = self.signatures.get(os.path.abspath(path))
        if sig is not None:
            self.now[os.path.abspath(path)] = sig

    def store(self, paths: Iterable[str]) -> None:
        """Keep the record: this run's files as found, other runs' (other
        folders sharing the cache) as they were."""
        after = dict(self.before)
        for path in paths:
            after.pop(os.path.abspath(path), None)
        after.update(self.now)
        if after != self.before:
            self.cache.store_turned_away(after)


def _refusal(folder: Path) -> str | None:
    """Why ``folder`` cannot be used as a cache folder; None when it can
    (or does not exist yet)."""
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cache folder {folder}: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        return f"cache folder {folder} is a link"
    if not stat.S_ISDIR(st.st_mode):
        return f"cache folder {folder} is not a folder"
    getuid = getattr(os, "getuid", None)
    if getuid is not None and st.st_uid != getuid():
        return f"cache folder {folder} is owned by another user"
    return None


def _create(path: Path, data: bytes) -> None:
    """Create ``path`` with ``data``; fails when anything is there (a link included)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _project_entry(root: str) -> str:
    return "project-" + content_hash(os.path.abspath(root).encode("utf-8", "surrogatepass"))[:32] + ".pjson"


class ProjectCache:
    """Project analysis results for one project root, valid for one key
    (a digest of every project file's size and modification time, the
    settings and loadlint's code): any change to any file recomputes them."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache

    def load(self, root: str, key: str) -> dict[str, dict[str, list[Finding]]] | None:
        """Findings by kind (``ProjectResult``'s fields), then absolute path, if stored for this key."""
        try:
            raw = self.cache.read(_project_entry(root))
            data = json.loads(raw)
            expect(data, dict)
            if data.get("key") != key or data.get("stamp") != self.cache.stamp:
                return None
            kinds = expect(data.get("findings"), dict).items()
            return {kind: {path: [read_finding(f, path) for f in expect(items, list)] for path, items in expect(found, dict).items()}
                    for kind, found in kinds}
        except Exception:  # a corrupt or crafted record is a miss, whatever it raises
            return None

    def store(self, root: str, key: str, findings: dict[str, dict[str, list[Finding]]]) -> None:
        """Remember the findings for this key (never raises)."""
        payload = {"key": key, "stamp": self.cache.stamp, "findings": {
            kind: {path: [finding_to_json(f) for f in items] for path, items in found.items()} for kind, found in findings.items()}}
        self.cache.write(_project_entry(root), json.dumps(payload, separators=(",", ":")).encode())


def is_cache_dir(folder: Path) -> bool:
    """Whether ``folder`` is a loadlint cache (so ``clean`` may delete it)."""
    try:
        # Its own tag, not one a link leads to; non-blocking, bounded.
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(folder / "CACHEDIR.TAG", flags)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False
            tag = handle.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return False
    return tag.startswith(CACHEDIR_TAG.splitlines()[0]) and "loadlint" in tag


def clean(folder: Path) -> bool:
    """Remove a cache folder; refuses a folder loadlint did not create."""
    if not folder.is_dir() or not is_cache_dir(folder):
        return False
    shutil.rmtree(folder, ignore_errors=True)
    return True
