from __future__ import annotations

import os
from typing import Iterator

from loadlint.facts.handles import Handle, stored_handle
from loadlint.facts.loaders import LoaderCall
from loadlint.rules.base import Context, Report, Rule
from loadlint.rules.project_context import ImportedLoader, ProjectContext, ProjectReport
from loadlint.rules.shared import module_spawn_reason, spawn_reason, workers_on


def _spawned_handle(ctx: Context, call: LoaderCall) -> tuple[Handle, str] | None:
    """LL014's condition without the worker gate."""
    if ctx.is_notebook:
        return None  # LL012: the notebook's class cannot reach a spawned worker at all
    _, cls = ctx.dataset_class(call)
    found = stored_handle(ctx.names, ctx.datasets, cls) if cls is not None else None
    why = module_spawn_reason(ctx, call) if found is not None else None
    return None if found is None or why is None else (found, why)


def message(owner: str, handle: dict[str, str], loader: str, workers: object, why: str) -> str:
    """The finding's text; ``owner`` is the class's ``__init__`` as the
    message names it, up to its closing backquote."""
    attr = handle["attr"]
    return (
        f"`{owner} stores {handle['what']} on the dataset (`self.{attr} = {handle['written']}`), and {loader}'s "
        f"{workers} workers may start with spawn or forkserver ({why}): starting them pickles the dataset, which "
        f"fails (`TypeError: {handle['error']}`); open it in the worker instead: `self.{attr} = None` in "
        "`__init__`, opened on the first `__getitem__` (or in a `worker_init_fn`)"
    )


def _imported_why(project: ProjectContext, loader: ImportedLoader) -> str | None:
    """Why the workers of a loader whose class is another module's may
    start with spawn or forkserver; None when they fork or the context is
    not a literal."""
    context = loader.context
    if context in ("spawn", "forkserver"):
        return f'`multiprocessing_context="{context}"`'
    if context is not None:
        return None  # "fork", or not a literal
    return spawn_reason(project.profile(loader.path), None, loader.start_methods)


class UnpicklableDatasetHandle(Rule):
    """
    ## What it does
    Checks for a `Dataset` whose `__init__` opens an `lmdb` environment
    (`lmdb.open(...)`), an `h5py.File(...)` or a file (`open(...)`) and
    stores it on `self`, used by a `DataLoader` with workers that may start
    with spawn or forkserver.

    ## Why is this bad?
    Workers started with spawn or forkserver receive the dataset pickled,
    and these handles cannot be pickled.  Iterating the loader fails as it
    starts the workers:

    ```text
    TypeError: cannot pickle 'Environment' object
    TypeError: h5py objects cannot be pickled
    TypeError: cannot pickle '_io.TextIOWrapper' object
    ```

    macOS and Windows always spawn; Linux starts workers with forkserver
    from Python 3.14, so a dataset that works on Linux today fails there.
    The start method comes from `multiprocessing_context`,
    `set_start_method(...)`, or the target's `platform` and `python`
    (`--target`, `[tool.loadlint.target]`); without a declared platform the
    portable answer applies.  With fork (Linux before Python 3.14, or
    `multiprocessing_context="fork"`) the workers inherit the handle and the
    rule is silent (sharing one LMDB or HDF5 handle across forked processes
    has problems of its own).

    The rule is silent when the handle is opened later (in `__getitem__`,
    or in a `worker_init_fn`), when `__init__` also assigns that attribute
    something else (closed and set to `None` once the length is read), when
    the class or a base defines `__getstate__`, `__reduce__` or
    `__reduce_ex__`, when a base class is imported (it may define them), in
    notebooks whose own class is the dataset (LL012 comes first), and when
    the worker count or the start method is not known.  A dataset class
    defined in another module of the project is followed by project
    analysis: the finding is then at the `DataLoader(...)`, naming the
    class's file, for a worker count known there or at least 1 for every
    input (`num_workers=LOADER_WORKERS`, LL201's fix), and LL201's fix is
    not offered at a loader over such a class.

    ## Example
    ```python
    import lmdb
    from torch.utils.data import DataLoader, Dataset


    class Frames(Dataset):
        def __init__(self, path):
            self.env = lmdb.open(path, readonly=True, lock=False)

        def __len__(self):
            return self.env.stat()["entries"]

        def __getitem__(self, i):
            with self.env.begin() as txn:
                return txn.get(str(i).encode())


    loader = DataLoader(Frames("frames.lmdb"), num_workers=4, multiprocessing_context="spawn")
    ```

    Use instead:
    ```python
    class Frames(Dataset):
        def __init__(self, path):
            self.path = path
            self.env = None  # opened in each worker, on first use
            with lmdb.open(path, readonly=True, lock=False) as env:
                self.length = env.stat()["entries"]

        def __len__(self):
            return self.length

        def __getitem__(self, i):
            if self.env is None:
                self.env = lmdb.open(self.path, readonly=True, lock=False)
            with self.env.begin() as txn:
                return txn.get(str(i).encode())
    ```

    ## Fix safety
    There is no automatic fix: where the handle is first needed, and what
    `__init__` reads from it, is for the author to decide.

    ## References
    - [PyTorch: Platform-specific behaviors](https://pytorch.org/docs/stable/data.html#platform-specific-behaviors)
    - [Python: what can be pickled](https://docs.python.org/3/library/pickle.html#what-can-be-pickled-and-unpickled)
    - [h5py: multiprocessing](https://docs.h5py.org/en/stable/mpi.html)
    """

    code = "LL014"
    name = "unpicklable-dataset-handle"
    summary = "a Dataset stores an `lmdb`/`h5py`/file handle opened in `__init__`: workers under spawn/forkserver cannot receive it"
    category = "crash"
    needs_hardware = True
    hazard_order = 2

    def worker_hazards(self, ctx: Context, call: LoaderCall) -> list[str]:
        found = _spawned_handle(ctx, call)
        if found is None:
            return []
        handle, why = found
        return [f"`{handle.cls}` holds {handle.what} that spawned workers cannot receive ({why})"]

    def check(self, ctx: Context) -> Iterator[Report]:
        reported: set[tuple[str, str]] = set()
        for call in ctx.calls:
            if not workers_on(call):
                continue
            found = _spawned_handle(ctx, call)
            if found is None:
                continue
            handle, why = found
            if (handle.cls, handle.attr) in reported:
                continue
            reported.add((handle.cls, handle.attr))
            loader = f"`{call.key[1]}`" if call.key is not None else "the DataLoader"
            fields = {"attr": handle.attr, "what": handle.what, "written": handle.written, "error": handle.error}
            yield Report(handle.node, message(f"{handle.cls}.__init__`", fields, loader, call.workers(), why))

    def imported_worker_hazards(self, project: ProjectContext) -> Iterator[ProjectReport]:
        for loader in project.imported:
            handle = loader.handle
            why = _imported_why(project, loader) if handle is not None else None
            if handle is not None and why is not None:
                yield ProjectReport(loader.path, loader.at, (
                    f"no fix: `{handle.cls}` (`{os.path.relpath(loader.module)}`) holds {handle.what} that spawned "
                    f"workers cannot receive ({why}); open it in the worker first (LL014)"
                ))

    def check_project(self, project: ProjectContext) -> Iterator[ProjectReport]:
        """A loader with workers whose dataset class, defined in another
        module, keeps a handle: reported at the loader."""
        for loader in project.imported:
            handle = loader.handle
            workers = loader.workers
            if workers is None or type(workers) is int and workers <= 0 or handle is None:
                continue
            why = _imported_why(project, loader)
            if why is None:
                continue
            owner = f"{handle.cls}.__init__` (`{os.path.relpath(loader.module)}`)"
            fields = {"attr": handle.attr, "what": handle.what, "written": handle.written, "error": handle.error}
            count = f"`{workers}`" if type(workers) is str else workers
            yield ProjectReport(loader.path, loader.at, message(owner, fields, "the DataLoader", count, why))
