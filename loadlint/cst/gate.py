"""Which libcst this process runs, and whether loadlint's speed-ups may touch it.

The fast path (``constructors``, the node-check switch in ``slicing``, the
private calls in ``codegen``, the walker's compiled field tables in
``walk``) leans on how libcst builds, checks and renders its nodes, which
no release promises to keep.  It is used only for the releases the tests
have run, ``LOWEST`` to ``NEWEST`` (their patch releases included: those
do not reshape nodes); any other release, or ``LOADLINT_PLAIN_LIBCST=1``,
gets plain libcst: ``libcst.parse_module``, ``Module.code_for_node``, its
position provider and a walk of every node field.  Both give the same
output (the tests compare them on every golden, rule example and example
project).  The bounds follow pyproject.toml's dependency on libcst.
"""

from __future__ import annotations

import functools
import os
import re

#: The oldest and the newest libcst release (major, minor) the tests have run.
LOWEST = (1, 4)
NEWEST = (1, 9)
#: Set to anything but "" or "0": plain libcst, whatever the release.
PLAIN_ENV = "LOADLINT_PLAIN_LIBCST"


@functools.cache
def libcst_version() -> str:
    """The installed release, without importing libcst (a warm run needs it
    for the cache's stamp and parses nothing).  ``importlib.metadata`` is
    imported here, not with the module: a cold run never asks, and its
    import costs about 15 ms."""
    from importlib import metadata

    try:
        return metadata.version("libcst")
    except metadata.PackageNotFoundError:
        return "unknown"


def tested(version: str) -> bool:
    """Whether ``version`` is a release in the tested range (a pre-release
    of the next one is not)."""
    match = re.fullmatch(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    return match is not None and LOWEST <= (int(match[1]), int(match[2])) <= NEWEST


@functools.cache
def _tested_here() -> bool:
    import libcst  # imported anyway by what asks: its own record, not the metadata's (slow to import)

    return tested(libcst.LIBCST_VERSION)


def plain_asked() -> bool:
    """Whether ``PLAIN_ENV`` asks for plain libcst (read at each call: a
    test or a host program may set the variable between two)."""
    return os.environ.get(PLAIN_ENV, "") not in ("", "0")


def fast() -> bool:
    """Whether loadlint may use its speed-ups now (``plain_asked`` is read
    at each call)."""
    return _tested_here() and not plain_asked()
