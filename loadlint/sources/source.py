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
from typing import Callable

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
#: Unicode line separators, the bidirectional controls that reorder what is
#: shown, and the other invisible format characters, variation selectors and
#: noncharacters (U+FFFE, U+FFFF, not allowed in XML).  Format characters count
#: because a culture-aware string search (the GitHub runner's) skips them:
#: ``#\u00ad#[`` would still be found as ``##[``.  A tab stays.
_HIDDEN_BMP = "\x00-\x08\x0a-\x1f\x7f-\x9f\xad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e" \
    "\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufe00-\ufe0f\ufeff\ufff9-\ufffb\ufffe\uffff"
_HIDDEN_ASTRAL = "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a" \
    "\U000e0001\U000e0020-\U000e007f\U000e0100-\U000e01ef"
# Two classes: one holding characters above U+FFFF gets no bitmap in re and
# is four times slower on every line.
_HIDDEN = re.compile(f"[{_HIDDEN_BMP}]")
_HIDDEN_ABOVE_BMP = re.compile(f"[{_HIDDEN_ASTRAL}]")
#: Lone surrogates: a file name that is not UTF-8 (os.fsdecode) holds them.
#: Shown as they are in text (a report file gets the name's own bytes);
#: escaped where the output must be valid text (XML).
_SURROGATE = re.compile("[\ud800-\udfff]")
#: GitHub's runner takes ``::command::`` at a line's start after blanks
#: (.NET's TrimStart) and the legacy ``##[command]`` anywhere in a line.
_COMMAND = re.compile(r"^(\s*):(?=:)|#(?=#\[)")


def visible(text: str, *, strict: bool = False) -> str:
    """``text`` for a report line: what a repository put in a file name, a
    source line or a configuration key is shown, never acted on.  Hidden
    characters are escaped (``\\x1b``, ``\\u202e``), so the text cannot start
    a line of its own, move the cursor or write to the clipboard; a ``::``
    opening the text (after blanks) and the ``#`` opening ``##[`` are escaped
    too (``\\x3a:``, ``\\x23#[``), so no CI runner reads it as a workflow
    command.  ``strict`` also escapes lone surrogates.

    The one escaping rule of every line loadlint prints; idempotent, so a
    fragment escaped once may be escaped again as part of its line."""
    if not (text.isascii() and text.isprintable()):
        text = _escape_hidden(text, _escaped)
    if strict and _SURROGATE.search(text) is not None:
        text = _SURROGATE.sub(_escaped, text)
    if "::" in text or "##[" in text:
        text = _COMMAND.sub(lambda m: rf"{m.group(1)}\x3a" if m.group(1) is not None else r"\x23", text)
    return text


def visible_lines(text: str) -> str:
    """``visible`` applied to each line of ``text``; Python's line breaks
    (``\\n``, ``\\r\\n``, ``\\r``) stay, so a diff of a CRLF file still applies."""
    return "".join(visible(body) + end for body, end in _BODY_END.findall(text))


def visible_json(serialized: str) -> str:
    """Serialised JSON under the same rule, with JSON's escapes: the value of
    every string is unchanged (``json.loads`` gives it back) while ``##[``
    is written ``\\u0023#[``; what is hidden is written ``\\u2028``."""
    # A JSON line break outside a string is layout; inside one json.dumps
    # has already escaped it, as every control character of ASCII output.
    if not (serialized.isascii() and serialized.replace("\n", "").isprintable()):
        serialized = "\n".join(_escape_hidden(part, _json_escaped) for part in serialized.split("\n"))
    if "##[" in serialized:
        serialized = serialized.replace("##[", "\\u0023#[")
    return serialized


_BODY_END = re.compile(r"([^\r\n]*)(\r\n|\r|\n|$)")


def _escape_hidden(text: str, escaped: Callable[[re.Match[str]], str]) -> str:
    if _HIDDEN.search(text) is not None:
        text = _HIDDEN.sub(escaped, text)
    if not text.isascii() and max(text) > "\uffff" and _HIDDEN_ABOVE_BMP.search(text) is not None:
        text = _HIDDEN_ABOVE_BMP.sub(escaped, text)
    return text


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _json_escaped(match: re.Match[str]) -> str:
    units = match.group().encode("utf-16-be")
    return "".join(f"\\u{int.from_bytes(units[i:i + 2], 'big'):04x}" for i in range(0, len(units), 2))
