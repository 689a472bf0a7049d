"""The runners of ``--tune``: the feed of the pass's batches of indices,
loading in the training process as ``_SingleProcessDataLoaderIter`` does,
and private loaders with workers fed by the feed (see
:mod:`loadlint.monitor.tuner`)."""

from __future__ import annotations

import time
import warnings
from collections import deque
from typing import Any, Iterator, Protocol

from loadlint.monitor.instrument import MULTI, SINGLE, Monitor


class Owner(Protocol):
    """What a private loader reads of its tuner."""

    monitor: Monitor
    loader: Any
    base_seed: int | None
    feed: "Feed"


#: A private loader's pass is over (the feed ended or stopped).
END = object()


class Feed:
    """The pass's batches of indices, shared by whichever configuration loads."""

    def __init__(self, source: Iterator[Any]) -> None:
        self.source = source
        self.back: deque[Any] = deque()
        self.outstanding: deque[Any] = deque()
        self.stopping = False
        self.done = False

    def pull(self) -> Any:
        if self.back:
            return self.back.popleft()
        try:
            return next(self.source)
        except StopIteration:
            self.done = True
            raise

    def prime(self) -> None:
        """Pull the first batch now, as a pass with workers does at ``iter()``."""
        try:
            self.back.append(self.pull())
        except StopIteration:
            pass

    def stream(self) -> Iterator[Any]:
        while not self.stopping:
            try:
                index = self.pull()
            except StopIteration:
                return
            self.outstanding.append(index)
            yield index

    def give_back(self) -> None:
        self.back.extendleft(reversed(self.outstanding))
        self.outstanding.clear()


class TunedIter:
    """The iterator a tuned pass hands to the loop: each batch from the tuner."""

    def __init__(self, tuner: Any) -> None:
        self.tuner = tuner
        self.iterator_name = tuner.written_runner_name

    def __iter__(self) -> "TunedIter":
        return self

    def __len__(self) -> int:
        return len(self.tuner.loader)

    def __next__(self) -> Any:
        return self.tuner.next_batch()


class FeedSampler:
    """The private loaders' batch sampler: the current pass's feed."""

    def __init__(self, tuner: Owner) -> None:
        self.tuner = tuner

    def __iter__(self) -> Iterator[Any]:
        return self.tuner.feed.stream()

    def __len__(self) -> int:
        return len(self.tuner.loader.batch_sampler)


def ready_seconds() -> float:
    """This thread's time waiting on a run queue (Linux), else 0."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as handle:
            return int(handle.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


class InProcess:
    """Loading in the training process, as ``_SingleProcessDataLoaderIter`` does."""

    name = SINGLE

    def __init__(self, torch: Any, loader: Any) -> None:
        kind = torch.utils.data.dataloader._DatasetKind
        self.fetcher = kind.create_fetcher(loader._dataset_kind, loader.dataset, loader._auto_collation,
                                           loader.collate_fn, loader.drop_last)
        self.pin = bool(loader.pin_memory) and torch.accelerator.is_available()
        accelerator = torch.accelerator.current_accelerator() if self.pin else None
        self.device = accelerator.type if accelerator is not None else None
        self.pin_memory = torch.utils.data._utils.pin_memory.pin_memory
        self.cpu = 0.0
        self.wall = 0.0

    fresh = True

    def start(self) -> None:
        pass

    def next(self, feed: Feed) -> Any:
        wall, cpu, ready = time.perf_counter(), time.thread_time(), ready_seconds()
        index = feed.pull()  # StopIteration ends the pass
        data = self.fetcher.fetch(index)
        if self.pin:
            data = self.pin_memory(data, self.device)
        # Busy is the thread's CPU time over the time it was not waiting for
        # a CPU: on a loaded machine a CPU-bound loader gets less CPU per
        # wall second (it would look like one waiting on I/O), and a loader
        # that sleeps on storage waits for a CPU at each wake-up (it would
        # look busy).  The thread's own: the sampler thread's reads of the
        # workers' memory are not loading.
        self.cpu += time.thread_time() - cpu
        self.wall += time.perf_counter() - wall - (ready_seconds() - ready)
        return data

    def close(self) -> None:
        pass


class Shadow:
    """A private DataLoader over the same dataset, fed by the feed."""

    name = MULTI

    def __init__(self, torch: Any, tuner: Owner, config: dict[str, Any]) -> None:
        loader = tuner.loader
        generator = torch.Generator()
        generator.manual_seed(tuner.base_seed or 0)
        tuner.monitor.internal.on = True
        try:
            with warnings.catch_warnings():
                # torch's advice on worker counts is about the user's loaders, not these.
                warnings.simplefilter("ignore", UserWarning)
                self.loader = torch.utils.data.DataLoader(
                    loader.dataset, batch_sampler=FeedSampler(tuner), num_workers=config["num_workers"],
                    collate_fn=loader.collate_fn, pin_memory=bool(config.get("pin_memory")), timeout=loader.timeout,
                    worker_init_fn=loader.worker_init_fn, multiprocessing_context=loader.multiprocessing_context,
                    generator=generator, prefetch_factor=config.get("prefetch_factor") or 2,
                    # Kept alive between windows: each window measures the steady rate.
                    persistent_workers=True, in_order=True)
        finally:
            tuner.monitor.internal.on = False
        self.tuner = tuner
        self.workers = config["num_workers"]
        self.pinned = bool(config.get("pin_memory"))
        self.it: Any = None
        self.fresh = True

    def shares(self, config: dict[str, Any]) -> bool:
        return config.get("num_workers") == self.workers and bool(config.get("pin_memory")) == self.pinned

    def deepens(self, config: dict[str, Any]) -> bool:
        depth = getattr(self.it, "_prefetch_factor", None)
        return self.shares(config) and depth is not None and (config.get("prefetch_factor") or 2) >= depth

    def depth(self, config: dict[str, Any]) -> None:
        if self.it is not None and hasattr(self.it, "_prefetch_factor"):
            self.it._prefetch_factor = config.get("prefetch_factor") or 2

    def start(self) -> None:
        self.fresh = self.it is None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            self.it = iter(self.loader)
        if self.it not in self.tuner.monitor.live:
            self.tuner.monitor.live.append(self.it)

    def next(self, feed: Feed) -> Any:
        try:
            batch = next(self.it)
        except StopIteration:
            return END
        feed.outstanding.popleft()
        return batch

    def close(self) -> None:
        it, self.it = self.it, None
        shutdown = getattr(it, "_shutdown_workers", None)
        if shutdown is not None:
            try:
                shutdown()
            except Exception:
                pass


def eligible(torch: Any, loader: Any) -> str | None:
    """Why the loader cannot be tuned in the run, or None."""
    data = torch.utils.data
    if isinstance(loader.dataset, data.IterableDataset):
        return ("an IterableDataset is not tuned in the run: its split across workers is not proven here "
                "(loadlint verify checks it)")
    if not getattr(loader, "_auto_collation", False):
        return "a loader without batching (batch_size=None) is not tuned"
    if not getattr(loader, "in_order", True):
        return "a loader with in_order=False is not tuned (its order is not the sampler's)"
    return None
