"""Step 2a: bytes on disk to text, the way Python itself would decode them.

Honours a UTF-8 BOM and PEP 263 coding lines.  Line endings are kept as they
are (libcst round-trips CRLF), so a fix can write the file back unchanged
outside its edit.
"""

from __future__ import annotations

import codecs
import io
import itertools
import re
import tokenize
from dataclasses import dataclass

#: Line breaks as libcst (and Python's tokenizer) count them.
LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


class DecodeError(Exception):
    """The bytes are not text in the declared encoding; carries a position."""

    def __init__(self, message: str, row: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.row = row
        self.column = column


@dataclass(frozen=True)
class Source:
    """Decoded source text and how to encode it back."""

    text: str
    encoding: str
    bom: bool

    def encode(self, text: str) -> bytes:
        data = text.encode(self.encoding)
        return (codecs.BOM_UTF8 + data) if self.bom else data


def decode(data: bytes) -> Source:
    """Decode a file's bytes as Python would; raises DecodeError with a position."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        raise DecodeError("UTF-16/UTF-32 source is not Python source (Python reads UTF-8 or a PEP 263 encoding)")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        message = exc.msg if hasattr(exc, "msg") else str(exc)
        if not message.startswith("invalid or missing"):
            raise DecodeError(f"invalid encoding declaration: {message}") from None
        # Not UTF-8 and nothing declared: decoding as UTF-8 below says where.
        encoding = "utf-8"
    bom = encoding == "utf-8-sig"
    body = data[len(codecs.BOM_UTF8):] if bom else data
    codec = "utf-8" if bom else encoding
    try:
        text = body.decode(codec)
    except UnicodeDecodeError as exc:
        row, column = position_of_byte(body, exc.start)
        raise DecodeError(f"cannot decode as {codec}: invalid byte 0x{body[exc.start]:02x}", row, column) from None
    except LookupError:
        raise DecodeError(f"unknown encoding {encoding!r}") from None
    if "\x00" in text:
        offset = text.index("\x00")
        row, column = position_of_offset(text, offset)
        raise DecodeError("source contains a NUL byte (binary file?)", row, column)
    return Source(text, codec, bom)


def position_of_byte(data: bytes, index: int) -> tuple[int, int]:
    """1-based (row, column) of a byte offset."""
    prefix = data[:index]
    row = len(LINE_BREAK.findall(prefix.decode("latin-1"))) + 1
    last = max(prefix.rfind(b"\n"), prefix.rfind(b"\r"))
    return row, index - last


def line_starts(text: str) -> list[int]:
    """Offsets at which each line begins (index 0 is line 1)."""
    if "\r" not in text:
        # One kind of line break: summed in C, three times faster than the scan.
        return list(itertools.accumulate(map((1).__add__, map(len, text.split("\n")[:-1])), initial=0))
    starts = [0]
    starts.extend(m.end() for m in LINE_BREAK.finditer(text))
    return starts


def position_of_offset(text: str, offset: int) -> tuple[int, int]:
    """1-based (row, column) of a character offset."""
    starts = line_starts(text)
    import bisect

    row = bisect.bisect_right(starts, offset)
    return row, offset - starts[row - 1] + 1


def lines_with_breaks(text: str) -> list[str]:
    """Lines with their own line breaks; "".join() gives the text back.
    Python's line breaks only: str.splitlines() also breaks on form feeds
    and Unicode separators."""
    return _LINE.findall(text)


def lines(text: str) -> list[str]:
    """Lines without their line breaks (libcst's notion of a line)."""
    return LINE_BREAK.split(text)


#: What a terminal or a line-based CI log acts on rather than shows: control
#: characters (a line break, an escape sequence's start, C1's CSI and OSC),
#: Unicode line separators, and the bidirectional controls that reorder what
#: is shown.  A tab stays.
_HIDDEN = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """``text`` for a report line: what a repository put in a file name or a
    source line is shown (``\\x1b``, ``\\n``), never acted on, so it cannot
    start a line of its own, move the cursor or write to the clipboard."""
    if _HIDDEN.search(text) is None:
        return text
    return _HIDDEN.sub(lambda m: _escaped(m.group()), text)


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
