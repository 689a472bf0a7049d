"""Every process pool loadlint starts (``check``'s workers, ``trace``'s
ranks) starts here, isolated from the folder it runs in.

multiprocessing starts a spawn or forkserver worker (and its resource
tracker, and the fork server itself) as ``python -c ...``, which puts the
current folder first on the import path and imports ``sitecustomize`` and
``usercustomize`` from it: in a checked repository, a planted
``multiprocessing/`` package or ``sitecustomize.py`` would run in every
worker before a line of ours.  Here those interpreters get ``-I`` (no
current folder, no user site, no ``PYTHON*`` variables), the path they take
over from this process loses its current-folder entries, and every worker,
forked ones included, drops them again before its first task.  Standard
library only: the lowest layer.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

#: How workers start.  fork shares the parent's imports for free; where
#: fork is unsafe (macOS) or missing, workers start from scratch.
START_METHOD = "fork" if sys.platform.startswith("linux") else "spawn"


@contextmanager
def pool(
    workers: int,
    method: str | None = None,
    initializer: Callable[..., None] | None = None,
    initargs: tuple[Any, ...] = (),
) -> Iterator[ProcessPoolExecutor]:
    """A process pool of ``workers``, started with ``method`` (default
    ``START_METHOD``) and isolated as the module says; shut down on exit,
    pending work cancelled."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context(method or START_METHOD)
    # The patches stay while the pool lives: spawn and forkserver pools
    # start workers on demand, not all at once.
    restore = _isolate_interpreters() if context.get_start_method() != "fork" else None
    executor = ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker, initargs=(initializer, initargs))
    try:
        yield executor
    finally:
        try:
            executor.shutdown(wait=True, cancel_futures=True)
        finally:
            if restore is not None:
                restore()


def without_current_folder(path: list[str], cwd: str) -> list[str]:
    """``path`` without the entries that name the current folder: ``""``,
    as ``-c`` or a prompt put it there, and ``cwd`` itself, as ``-m`` does."""
    return [entry for entry in path if entry not in ("", ".", cwd)]


def _start_worker(initializer: Callable[..., None] | None, initargs: tuple[Any, ...]) -> None:
    # A forked worker inherits the parent's path as it is; a spawned one
    # has it from the preparation data.  Either way, imports made later (a
    # lazily imported module) must not come from the checked folder.
    sys.path[:] = without_current_folder(sys.path, os.getcwd())
    if initializer is not None:
        initializer(*initargs)


def _isolate_interpreters() -> Callable[[], None]:
    """Add ``-I`` to every interpreter multiprocessing starts, and strip the
    current folder from the path workers take over; returns the undo."""
    import multiprocessing.spawn as spawn
    import multiprocessing.util as util

    # The flags of every interpreter multiprocessing starts: spawned
    # workers', the fork server's and the resource tracker's.
    flags: Callable[[], list[str]] = getattr(util, "_args_from_interpreter_flags")
    preparation = spawn.get_preparation_data

    def isolated_flags() -> list[str]:
        given = list(flags())
        return given if "-I" in given else [*given, "-I"]

    def preparation_data(name: str) -> dict[str, Any]:
        data = dict(preparation(name))
        data["sys_path"] = without_current_folder(list(data.get("sys_path", [])), os.getcwd())
        return data

    setattr(util, "_args_from_interpreter_flags", isolated_flags)
    spawn.get_preparation_data = preparation_data

    def restore() -> None:
        setattr(util, "_args_from_interpreter_flags", flags)
        spawn.get_preparation_data = preparation

    return restore
