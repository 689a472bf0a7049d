"""Keeping the server responsive while it analyses.

Handlers that analyse run their work on one background thread, in turn,
so the event loop keeps reading requests: a ``shutdown`` is answered at
once.  A thread alone is not enough: libcst's native parser holds the
interpreter lock for seconds on a large file, and the project phase of a
saved document (its project's files, callers and loops) can take a minute.
That work, and the project ``fix`` behind fix-all, runs in a worker
process (started once, isolated as ``check``'s workers are), which a
shutdown kills: whatever it was doing is abandoned.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

    from loadlint.api import ProfileCache
    from loadlint.types import Finding
    from loadlint.workspace.config import Settings

T = TypeVar("T")

#: Unsaved documents longer than this (in characters) are analysed in the
#: worker process too: parsing them on the thread would hold the
#: interpreter lock for more than a second.
IN_PROCESS_LIMIT = 64_000

#: The server's event loop, where every message to the client is sent from.
_loop: asyncio.AbstractEventLoop | None = None


class Stopped(Exception):
    """The server is shutting down: the work was abandoned."""


def on_loop(action: Callable[[], object]) -> None:
    """Run ``action`` on the event loop: now if this is its thread, else soon."""
    loop = _loop
    if loop is None or threading.current_thread() is threading.main_thread():
        action()
    else:
        loop.call_soon_threadsafe(action)


class Worker:
    """The background thread and the worker process."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self.stack = contextlib.ExitStack()
        self.executor: ProcessPoolExecutor | None = None
        self.stopped = False
        self.lock = threading.Lock()

    def offload(self, action: Callable[[], T]) -> asyncio.Future[T]:
        """``action()`` on the background thread, awaited on the loop."""
        global _loop
        loop = _loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def settle(result: Any, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

        def job() -> None:
            try:
                result = action()
            except BaseException as exc:  # the handler awaiting it raises it
                loop.call_soon_threadsafe(settle, None, exc)
            else:
                loop.call_soon_threadsafe(settle, result, None)

        self.jobs.put(job)
        if self.thread is None:
            # A daemon: a job still running never holds the process's exit.
            self.thread = threading.Thread(target=self._serve, name="loadlint-lsp", daemon=True)
            self.thread.start()
        return future

    def _serve(self) -> None:
        while True:
            self.jobs.get()()

    def call(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in the worker process (from the background
        thread, which waits without holding the interpreter lock)."""
        from concurrent.futures.process import BrokenProcessPool

        future = self._submit(function, *args)
        try:
            return future.result()
        except BrokenProcessPool:
            with self.lock:  # killed: a later call starts another, unless shutting down
                self._close()
            raise Stopped() from None

    def _submit(self, function: Callable[..., T], *args: Any) -> Future[T]:
        with self.lock:
            if self.stopped:
                raise Stopped()
            if self.executor is None:
                from loadlint.processes import pool

                # Spawned, not forked: a child forked while the server's
                # reader thread holds stdin's lock hangs closing stdin.
                self.executor = self.stack.enter_context(pool(1, method="spawn"))
            return self.executor.submit(function, *args)

    def _close(self) -> None:
        if self.executor is not None:
            self.executor = None
            self.stack.close()
            self.stack = contextlib.ExitStack()

    def stop(self) -> None:
        """Shutting down: kill the worker process, refuse more work (never waits)."""
        import multiprocessing

        self.stopped = True
        for child in multiprocessing.active_children():
            child.terminate()


# -- what runs in the worker process -------------------------------------------


def project_findings(path: str, settings: Settings, profiles: ProfileCache) -> list[Finding]:
    """A saved document's findings with its project's."""
    from loadlint.api import findings_in_project

    return findings_in_project(Path(path), settings, profiles)


def fixed_in_project(path: str, settings: Settings, profiles: ProfileCache) -> str | None:
    """The saved file's text after a dry-run ``fix`` of it (its project read
    from disk, nothing written)."""
    from loadlint import api

    return api.fixed_in_project(Path(path), settings, profiles)


def document_findings(text: str, path: str, settings: Settings, profiles: ProfileCache, decide: bool) -> list[Finding]:
    """An unsaved document's findings; with ``decide``, with the fixes ``fix`` would apply."""
    from loadlint.api import analyse_document, decided_findings, options_for

    options = options_for(settings, path, profiles)
    return decided_findings(text, path, options) if decide else analyse_document(text, path, options)[0]


def fixed_text(text: str, path: str, settings: Settings, profiles: ProfileCache) -> str | None:
    """An unsaved document after its own fixes (None: none applies)."""
    from loadlint.api import fixed_document, options_for

    return fixed_document(text, path, options_for(settings, path, profiles), unsafe=settings.unsafe_fixes)
