"""Reading and writing source files: the only place that touches them.

Reads refuse what is not a regular file; writes are atomic and refuse to
overwrite a file that changed since it was read; diffs are computed the way
Python counts lines.
"""

from __future__ import annotations

import difflib
import errno
import os
import re
import stat
from pathlib import Path

from loadlint.sources.boundary import is_inside, project_root
from loadlint.sources.source import lines_with_breaks


#: The most bytes read from any one file.  Sources far smaller are already
#: too large to analyse (LL900); the bound keeps a link to ``/dev/zero`` or a
#: huge planted file from growing memory without end.
MAX_READ_BYTES = 64 * 1024 * 1024


class Staging:
    """What one dry run (``fix --diff``) has written instead of the disk:
    real path -> bytes.  Reads through it see these, so the rounds of a fix
    (the project's included) build on one another while no file changes;
    each run makes its own, so no other run sees them."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def stage(self, path: Path | str, data: bytes) -> None:
        self.files[os.path.realpath(path)] = data

    def read_resolved(self, path: Path | str, within: str | None = None, limit: int = MAX_READ_BYTES) -> tuple[str | None, bytes]:
        """``read_resolved``, the staged bytes winning over the disk's."""
        if not self.files:
            return read_resolved(path, within, limit)
        real = None
        if within is not None:
            real = os.path.realpath(path)
            if not is_inside(real, within, resolved=True):
                raise OSError(errno.EACCES, "link leads outside the project", os.fspath(path))
        staged = self.files.get(real if real is not None else os.path.realpath(path))
        return (real, staged) if staged is not None else read_resolved(path, within, limit)

    def read(self, path: Path | str, within: str | None = None, limit: int = MAX_READ_BYTES) -> bytes:
        return self.read_resolved(path, within, limit)[1]


def read_source(path: Path | str, within: str | None = None, limit: int = MAX_READ_BYTES) -> bytes:
    """A file's bytes, read safely from a repository nobody vouched for.

    A FIFO, device or socket is refused, not read: it could block forever or
    never end (opened non-blocking, so a FIFO without a writer cannot hang
    the open either).  A file over ``limit`` bytes is refused before it is
    read.  With ``within`` (a folder), a path whose links lead outside it is
    refused: what a repository links to is not the repository's.  Files the
    user names themselves are read without ``within``.
    """
    return read_resolved(path, within, limit)[1]


def read_resolved(path: Path | str, within: str | None = None, limit: int = MAX_READ_BYTES) -> tuple[str | None, bytes]:
    """``read_source``, with the real path it read when ``within`` is given (else None)."""
    target = os.fspath(path)
    real = None
    if within is not None:
        real = target = os.path.realpath(target)
        if not is_inside(target, within, resolved=True):
            raise OSError(errno.EACCES, "link leads outside the project", os.fspath(path))
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    if within is not None:
        # Resolved above: a link swapped in since then is not followed.
        flags |= getattr(os, "O_NOFOLLOW", 0)
    # Plain descriptor calls: a file object costs as much again as the read
    # of a typical source file.
    fd = os.open(target, flags)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"file too large: over {limit:,} bytes", os.fspath(path))
        # A file that grows while read (or lies about its size) stops at the bound too.
        chunks = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, max(st.st_size + 1, 1 << 16)))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"file too large: over {limit:,} bytes", os.fspath(path))
    return real, data


class KeptBytes:
    """The files a run read, kept for the project phase's byte searches of
    the same files: reading each again (resolving its links, opening it)
    cost Lightning's cold run 0.06 s.  Up to ``budget`` bytes; a file beyond
    it, or read without a folder to stay within, is read again when asked
    (through ``staging``, a dry run's, whose bytes win over what was kept)."""

    def __init__(self, budget: int, staging: Staging | None = None) -> None:
        self.budget = budget
        self.staging = staging
        self.files: dict[str, tuple[str, bytes]] = {}

    def keep(self, path: Path | str, real: str | None, data: bytes) -> None:
        if real is not None and len(data) <= self.budget:
            self.budget -= len(data)
            self.files[os.path.abspath(path)] = (real, data)

    def read(self, path: Path | str, within: str | None = None) -> bytes:
        """``read_source(path, within)``, from what was kept when it can."""
        staged = self.staging is not None and bool(self.staging.files)
        kept = None if staged else self.files.get(os.path.abspath(path))
        if kept is None:
            return self.staging.read(path, within) if self.staging is not None else read_source(path, within)
        real, data = kept
        if within is not None and not is_inside(real, within, resolved=True):
            raise OSError(errno.EACCES, "link leads outside the project", os.fspath(path))
        return data


class FileChanged(Exception):
    """The file on disk no longer holds the bytes the fixes were made from."""


TEMP_SUFFIX = ".loadlint-tmp"
#: What follows ".<file name>." in a temporary file's name: pid, mkstemp's letters.
_TEMP_NAME = re.compile(r"([0-9]+)\.[a-z0-9_]+" + re.escape(TEMP_SUFFIX))


def remove_stale_temps(path: Path) -> None:
    """Remove the temporary files of ``path`` whose writer is gone.

    A run killed (SIGKILL, power loss) between creating its temporary file
    and renaming it over the original leaves it behind; no handler can run
    then, so the next fix of the file cleans up.  A file whose process is
    alive (or whose name is not ours) is left alone.
    """
    prefix = f".{path.name}."
    try:
        names = os.listdir(path.parent)
    except OSError:
        return
    for name in names:
        if not name.startswith(prefix):
            continue
        match = _TEMP_NAME.fullmatch(name, len(prefix))
        if match is None or _alive(int(match.group(1))):
            continue
        try:
            os.unlink(path.parent / name)
        except OSError:
            pass


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # exists but not ours, or cannot tell: keep its file
    return True


def write_fixes(path: Path, original: bytes, new: bytes) -> str | None:
    """Write fixed bytes over ``path`` (see ``write_atomic``); the error to
    report when they could not be written, None when they were."""
    try:
        write_atomic(path, original, new)
    except FileChanged:
        return "file changed on disk while it was being fixed; not written"
    except OSError as exc:
        return f"cannot write fixes: {exc.strerror or exc}"
    return None


def write_atomic(path: Path, original: bytes, new: bytes) -> None:
    """Replace ``path`` with ``new`` all at once: a temporary file in the same
    folder, flushed to disk, then renamed over the original (keeping its
    mode).  Refuses when the file no longer holds ``original``, so a change
    made by someone else since we read it is never overwritten.

    A symbolic link is followed: its target is rewritten and the link stays,
    when the target is inside the link's project; a link leading out of the
    project is refused (a repository's link is no licence to write elsewhere).
    """
    link = Path(os.path.abspath(path))
    path = Path(os.path.realpath(path))
    if path != link and not is_inside(str(path), str(project_root(link.parent))):
        raise PermissionError(errno.EACCES, "link leads outside the project; not written")
    directory = path.parent
    mode = stat.S_IMODE(os.stat(path).st_mode)
    # The mode bits count too: a file nobody may write is meant to stay as it
    # is, even for a user (root) whom os.access lets write anything.
    if not os.access(path, os.W_OK) or not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise PermissionError(13, "file is read-only")
    import tempfile  # only fixing needs it; start-up should not pay for it

    remove_stale_temps(path)
    # The writer's process id in the name: a later run can tell a file a
    # killed run left behind from one that a running fix is about to rename.
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=TEMP_SUFFIX, dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(new)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if path.read_bytes() != original:
            raise FileChanged(str(path))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    # The rename is durable only once the folder's entry is on disk.
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def create_new(path: Path, data: bytes) -> None:
    """Create ``path`` holding ``data``; refused when anything is there, a
    dangling link included (``O_EXCL`` follows no link).  A partial file
    left by a failed write is removed."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        try:
            os.unlink(path)
        except OSError:
            pass
        raise


def unified_diff(label: str, before: str, after: str) -> str:
    """``before`` -> ``after`` as a unified diff between ``a/label`` and ``b/label``."""
    if before == after:
        return ""
    # Split as Python counts lines: str.splitlines() would also break on
    # form feeds and Unicode separators, which garbles the hunks.
    lines = difflib.unified_diff(
        lines_with_breaks(before), lines_with_breaks(after), fromfile=f"a/{label}", tofile=f"b/{label}"
    )
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in lines)
