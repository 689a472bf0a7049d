"""Fresh loaders for the candidates, built from the captured arguments."""

from __future__ import annotations

import itertools
import math
from typing import Any

from loadlint.verify.child.capture import config_to_kwargs


def _limited_class() -> Any:
    import torch

    class _LimitedIterable(torch.utils.data.IterableDataset):
        """An IterableDataset cut to ``total`` samples shared among workers,
        so that a benchmark epoch of a long stream still ends."""

        def __init__(self, dataset: Any, total: int) -> None:
            self.dataset = dataset
            self.total = total

        def __iter__(self) -> Any:
            info = torch.utils.data.get_worker_info()
            share = self.total if info is None else math.ceil(self.total / info.num_workers)
            return itertools.islice(iter(self.dataset), share)

    _LimitedIterable.__module__ = __name__
    _LimitedIterable.__qualname__ = "_LimitedIterable"
    return _LimitedIterable


def __getattr__(name: str) -> Any:
    # Built on first use because this module must import without torch;
    # reachable as a module attribute so that spawn workers unpickle it.
    if name == "_LimitedIterable":
        cls = _limited_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)


def limited(dataset: Any, total: int) -> Any:
    """``dataset`` (an IterableDataset) cut to ``total`` samples."""
    cls = globals().get("_LimitedIterable") or __getattr__("_LimitedIterable")
    return cls(dataset, total)


def make_loader(torch: Any, arguments: dict[str, Any], config: dict[str, Any],
                plan: list[Any] | None = None, auto_collation: bool = True,
                dataset: Any = None) -> Any:
    """A DataLoader with the captured ``arguments`` and the tunable
    ``config``; ``plan`` fixes the batches (index lists) it yields."""
    kw = dict(arguments)
    kw.update(config_to_kwargs(config, arguments))
    if dataset is not None:
        kw["dataset"] = dataset
    if plan is not None:
        if auto_collation:
            kw.update(batch_sampler=plan, batch_size=1, shuffle=None, sampler=None,
                      drop_last=False)
        else:
            kw.update(sampler=plan, shuffle=None, batch_sampler=None)
    if not kw.get("pin_memory_device"):
        kw.pop("pin_memory_device", None)
    return torch.utils.data.DataLoader(**kw)


def shutdown(loader: Any, it: Any = None) -> None:
    """Stop a loader's workers now rather than at garbage collection."""
    for obj in (it, getattr(loader, "_iterator", None)):
        stop = getattr(obj, "_shutdown_workers", None)
        if stop is not None:
            try:
                stop()
            except Exception:
                pass
    try:
        loader._iterator = None
    except Exception:
        pass


def workers_of(it: Any) -> list[int]:
    """Process ids of a multi-process iterator's workers."""
    return [w.pid for w in getattr(it, "_workers", []) if getattr(w, "pid", None)]


def index_batches(torch: Any, arguments: dict[str, Any], config: dict[str, Any],
                  limit: int | None) -> tuple[list[Any], int]:
    """The first ``limit`` index batches the loader's sampler yields, and its
    length. The same seed for every candidate's sampler: the index streams
    of two shuffled loaders are then comparable element for element."""
    loader = make_loader(torch, arguments, config)
    torch.manual_seed(0)
    gen = arguments.get("generator")
    state = gen.get_state() if gen is not None else None
    try:
        stream = list(itertools.islice(iter(loader._index_sampler), limit))
        total = len(loader)
    finally:
        if state is not None:
            gen.set_state(state)
    return [list(b) if isinstance(b, (list, tuple)) else b for b in stream], total
