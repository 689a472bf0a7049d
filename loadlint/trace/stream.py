"""Read a Chrome-trace (Kineto) JSON file one event at a time.

A 100 MB trace parsed whole becomes gigabytes of dicts; here only the
top-level keys are decoded whole (they are small) and ``traceEvents`` is
decoded element by element from a sliding text buffer, with the C scanner
of the standard library.  gzip is recognised by its magic bytes, not the
file name.
"""

from __future__ import annotations

import errno
import gzip
import io
import os
import stat
import json
import re
import zlib
from json.scanner import make_scanner
from pathlib import Path
from typing import IO, Any, Callable, cast

_WS = re.compile(r"[ \t\n\r]*")
_CHUNK = 1 << 20
#: The most a trace may make the reader decompress, hold and keep: JSON
#: characters per file, characters of one value (an event, a header entry)
#: and events read (docs/trace.md).  A profile of a few steps is far below each;
#: a few kilobytes of gzip can expand past any of them.
MAX_TEXT_CHARS = 2 << 30
MAX_ELEMENT_CHARS = 16 << 20
MAX_EVENTS = 50_000_000
#: Events kept for the diagnosis (GPU work and copies, runtime calls, frames,
#: steps): the memory a trace may take.  A profile recorded with stacks
#: reads millions of events but keeps few (events.py counts them).
MAX_KEPT_EVENTS = 2_000_000#: Decode an element only when this much text is buffered after it (or the
#: file ends): an event longer than that is retried with more text.
_AHEAD = 1 << 16


class TraceError(Exception):
    """The trace cannot be read: the message is one line for the user."""


class _Buffer:
    def __init__(self, stream: IO[str], name: str) -> None:
        self.stream, self.name = stream, name
        self.text, self.pos, self.eof = "", 0, False
        self.consumed = 0  # characters dropped from the front, for messages
        self.read = 0
        self.decoder = json.JSONDecoder()

    def fill(self, need: int = _AHEAD) -> None:
        while not self.eof and len(self.text) - self.pos < need:
            try:
                chunk = self.stream.read(max(_CHUNK, need))
            except (EOFError, OSError, zlib.error, UnicodeDecodeError) as exc:
                raise TraceError(f"{self.name}: cannot read the trace ({_reason(exc)})") from None
            if not chunk:
                self.eof = True
                break
            self.read += len(chunk)
            if self.read > MAX_TEXT_CHARS:
                raise TraceError(f"{self.name}: the trace is longer than {MAX_TEXT_CHARS:,} characters of JSON (the most loadlint reads)")
            if self.pos > _CHUNK:
                self.consumed += self.pos
                self.text, self.pos = self.text[self.pos:], 0
            self.text += chunk

    def skip(self) -> str:
        """The next character after whitespace ('' at the end)."""
        self.fill()
        self.pos = _WS.match(self.text, self.pos).end()  # type: ignore[union-attr]
        while self.pos == len(self.text) and not self.eof:
            self.fill()
            self.pos = _WS.match(self.text, self.pos).end()  # type: ignore[union-attr]
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, chars: str) -> str:
        char = self.skip()
        if not char:
            raise TraceError(f"{self.name}: truncated JSON (the file ends inside the trace)")
        if char not in chars:
            raise TraceError(f"{self.name}: malformed JSON at character {self.consumed + self.pos}: expected {' or '.join(repr(c) for c in chars)}")
        self.pos += 1
        return char

    def value(self) -> Any:
        self.skip()
        need = _AHEAD
        while True:
            try:
                found, end = self.decoder.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                if self.eof:
                    # A file cut short (a crashed run, a partial copy) fails where
                    # its text runs out, inside a string or a literal; ``{bad``
                    # fails on a character that no JSON could continue with.
                    rest = self.text[exc.pos:].strip()
                    cut = (
                        exc.pos >= len(self.text.rstrip()) - 1 or exc.msg.startswith("Unterminated string")
                        or (bool(rest) and any(word.startswith(rest) for word in ("true", "false", "null")))
                        or re.fullmatch(r"-?[0-9.eE+-]*", rest) is not None
                    )
                    where = "truncated JSON (the file ends inside the trace)" if cut else f"malformed JSON at character {self.consumed + exc.pos}: {exc.msg}"
                    raise TraceError(f"{self.name}: {where}") from None
                self._within_bound(len(self.text))
                need = min(need * 4, MAX_ELEMENT_CHARS + 1)
                self.fill(need)
                continue
            except RecursionError:
                raise TraceError(f"{self.name}: a JSON value of the trace is nested too deeply") from None
            except ValueError as exc:  # an integer past Python's digit limit
                raise TraceError(f"{self.name}: malformed JSON at character {self.consumed + self.pos}: {exc}") from None
            if end == len(self.text) and not self.eof and not isinstance(found, (dict, list, str)):
                self._within_bound(end)
                self.fill(len(self.text) - self.pos + _CHUNK)  # a number may continue in the next chunk
                if len(self.text) > end:
                    continue
            self.pos = end
            return found

    def _within_bound(self, end: int) -> None:
        if end - self.pos > MAX_ELEMENT_CHARS:
            raise TraceError(f"{self.name}: a JSON value of the trace is longer than {MAX_ELEMENT_CHARS:,} characters (the most loadlint reads)")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    if isinstance(exc, EOFError):
        return "the gzip stream is truncated"
    return str(exc) or type(exc).__name__


def open_text(path: Path) -> IO[str]:
    """The file as text, gunzipped when it starts with gzip's magic bytes."""
    try:
        # Non-blocking and regular files only: a FIFO or a device would never end.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        raw = os.fdopen(fd, "rb")
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raw.close()
            raise OSError(errno.EINVAL, "not a regular file")
    except OSError as exc:
        raise TraceError(f"{path}: cannot open ({exc.strerror or exc})") from None
    magic = raw.read(2)
    raw.seek(0)
    if magic == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.GzipFile(fileobj=raw), encoding="utf-8")
    return io.TextIOWrapper(raw, encoding="utf-8")


def read_events(path: Path, on_event: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Call ``on_event`` for each element of ``traceEvents``; the other
    top-level keys, decoded.  A bare JSON array is read as the events."""
    header: dict[str, Any] = {}
    with open_text(path) as stream:
        buf = _Buffer(stream, str(path))
        first = buf.skip()
        if not first:
            raise TraceError(f"{path}: the file is empty")
        if first == "[":
            buf.pos += 1
            _elements(buf, on_event)
            header["traceEvents"] = True
            return header
        buf.expect("{")
        if buf.skip() == "}":
            raise TraceError(f"{path}: the trace is an empty JSON object (no traceEvents)")
        held = 0
        while True:
            key = buf.value()
            if not isinstance(key, str):
                raise TraceError(f"{path}: malformed JSON: a key is not a string")
            buf.expect(":")
            if key == "traceEvents":
                buf.expect("[")
                _elements(buf, on_event)
                header[key] = True
            else:
                start = buf.consumed + buf.pos
                header[key] = buf.value()
                # Each value is bounded; so are all of them together.
                held += buf.consumed + buf.pos - start + len(key)
                if held > MAX_ELEMENT_CHARS:
                    raise TraceError(f"{path}: the trace's top-level values besides traceEvents are longer than "
                                     f"{MAX_ELEMENT_CHARS:,} characters (the most loadlint reads)")
            if buf.expect(",}") == "}":
                break
    return header


_SEPARATOR = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")


def _elements(buf: _Buffer, on_event: Callable[[dict[str, Any]], None]) -> None:
    if buf.skip() == "]":
        buf.pos += 1
        return
    # The hot loop, once per event: the C scanner and one regular
    # expression; the buffer's careful methods only where a chunk ends or
    # the text is wrong.
    # typeshed types make_scanner's context narrower than the decoder it takes
    scan: Callable[[str, int], tuple[Any, int]] = make_scanner(cast(Any, buf.decoder))
    separator = _SEPARATOR.match
    count = 0
    while True:
        if len(buf.text) - buf.pos < _AHEAD and not buf.eof:
            buf.fill()
        text, pos = buf.text, buf.pos
        try:
            event, end = scan(text, pos)
        except (StopIteration, ValueError, RecursionError):  # JSONDecodeError is a ValueError
            event = buf.value()
            text, end = buf.text, buf.pos
        count += 1
        if count > MAX_EVENTS:
            raise TraceError(f"{buf.name}: the trace holds more than {MAX_EVENTS:,} events (the most loadlint reads); profile fewer steps")
        if isinstance(event, dict):
            on_event(event)
        found = separator(text, end)
        if found is None or (found.end() == len(text) and not buf.eof):
            buf.pos = end
            char = buf.expect(",]")
        else:
            char, buf.pos = found.group(1), found.end()
        if char == "]":
            return
