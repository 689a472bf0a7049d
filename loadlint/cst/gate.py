"""Which libcst this process runs, read once from its installed metadata."""

from __future__ import annotations

import functools
from importlib import metadata


@functools.cache
def libcst_version() -> str:
    try:
        return metadata.version("libcst")
    except metadata.PackageNotFoundError:
        return "unknown"
