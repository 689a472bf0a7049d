"""The text pre-filter: files that cannot construct a DataLoader are read
and skipped, never parsed (parsing is by far the largest cost)."""

from __future__ import annotations

import codecs
import re

from loadlint.sources.source import DecodeError, decode

#: A file that never contains one of these cannot construct a DataLoader (or
#: have a framework build one: ``TrainingArguments``) and is not parsed at all.
PREFILTER = ("DataLoader", "TrainingArguments")

# Constructing one needs a call or an alias: ``DataLoader(``, ``X.DataLoader
# (`` or ``import DataLoader as DL``.  Files that only name the class (type
# hints, isinstance checks, imports) are skipped: in real trees that is most
# of the files mentioning it, and parsing is by far the largest cost.
_CONSTRUCTS = re.compile(r"DataLoader\s*\(|DataLoader\s+as\s|TrainingArguments\s*\(")
_CONSTRUCTS_BYTES = re.compile(rb"DataLoader\s*\(|DataLoader\s+as\s|TrainingArguments\s*\(")


def may_construct_loader(text: str) -> bool:
    """The text pre-filter: False means no DataLoader can be built here."""
    return any(word in text for word in PREFILTER) and _CONSTRUCTS.search(text) is not None


_WIDE_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def passes_prefilter(data: bytes) -> bool:
    """Whether these bytes may construct a DataLoader.  UTF-16/32 text is
    searched in its own encoding: Python cannot read it (LL901), and a
    training script saved that way must not pass as clean."""
    if (b"DataLoader" in data or b"TrainingArguments" in data) and _CONSTRUCTS_BYTES.search(data) is not None:
        return True
    for bom, codec in _WIDE_BOMS:
        if data.startswith(bom):
            return may_construct_loader(data.decode(codec, "replace"))
    return False


def undecodable(data: bytes) -> bool:
    """Whether bytes the pre-filter skips cannot be read as Python source
    (a NUL byte, bytes invalid in the file's encoding, an unknown coding
    cookie): such a file is still reported (LL901).  A decode costs about
    1 ms a MB, next to a parse's 500 ms; a syntax check of skipped files
    would cost 0.4x the parse of the files that pass (docs/performance.md)."""
    try:
        decode(data)
    except DecodeError:
        return True
    return False
