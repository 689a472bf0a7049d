"""The ``ddp`` and ``ddp_sim`` modes: each rank's sampler indices per epoch
and its ``set_epoch`` calls, recorded or simulated for the parent's
comparison (:mod:`loadlint.verify.ddp`)."""

from __future__ import annotations

import itertools
import os
from typing import Any

from loadlint.verify.child.capture import run_user_code
from loadlint.verify.child.state import State, StopScript


def _flatten_indices(stream: Any, cap: int) -> list[int]:
    out: list[int] = []
    for item in stream:
        if isinstance(item, (list, tuple)):
            out.extend(int(i) for i in item)
        else:
            out.append(int(item))
        if len(out) >= cap:
            break
    return out


def _safe_len(obj: Any) -> int | None:
    try:
        return len(obj)
    except Exception:
        return None


def _sampler_facts(loader: Any, sampler_name: str, is_dist: bool) -> dict[str, Any]:
    sampler = loader.sampler
    return {
        "sampler": sampler_name,
        "distributed_sampler": is_dist,
        "drop_last": bool(getattr(sampler, "drop_last", False)),
        "dataset_len": _safe_len(loader.dataset),
    }


def run_ddp(torch: Any, state: State) -> dict[str, Any]:
    """Inside one rank: the target loader's indices at every ``iter()``
    (a few real batches fed to the loop) and every ``set_epoch`` call."""
    spec = state.spec
    ddp = spec.get("ddp", {})
    epochs_max = int(ddp.get("epochs", 3))
    batches = int(ddp.get("batches", 2))
    cap = int(ddp.get("cap", 1_000_000))
    DataLoader = torch.utils.data.DataLoader
    original_iter = DataLoader.__iter__
    rank = int(os.environ.get("RANK", "0"))
    info: dict[str, Any] = {"rank": rank, "world_size": int(os.environ.get("WORLD_SIZE", "1")),
                            "epochs": [], "set_epoch": [], "notes": []}
    iters = {"n": 0}

    import torch.distributed as dist

    original_init_pg = dist.init_process_group

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        backend = kwargs.get("backend", args[0] if args else None)
        if backend and "nccl" in str(backend) and not torch.cuda.is_available():
            info["notes"].append(f"the script asked for backend {backend!r}; gloo used (no CUDA)")
            kwargs["backend"] = "gloo"
            args = args[1:]
        info["backend"] = str(kwargs.get("backend", args[0] if args else "default"))
        return original_init_pg(*args, **kwargs)

    dist.init_process_group = init_process_group
    from torch.utils.data.distributed import DistributedSampler

    original_set_epoch = DistributedSampler.set_epoch

    def set_epoch(self: Any, epoch: int) -> None:
        info["set_epoch"].append({"epoch": int(epoch), "before_iter": iters["n"] + 1})
        return original_set_epoch(self, epoch)

    DistributedSampler.set_epoch = set_epoch

    def __iter__(self: Any) -> Any:
        if self is not state.target_instance:
            return original_iter(self)
        iters["n"] += 1
        state.progress("ddp", epoch=iters["n"])
        if iters["n"] > epochs_max:
            state.stopped = True
            raise StopScript()
        sampler = self.sampler
        if isinstance(self.dataset, torch.utils.data.IterableDataset):
            info["notes"].append("IterableDataset: no sampler indices to compare")
            info["epochs"].append({"indices": None})
            return itertools.islice(original_iter(self), batches)
        stream = list(itertools.islice(iter(self._index_sampler), None))
        info["epochs"].append({"indices": _flatten_indices(stream, cap),
                               "sampler_epoch": getattr(sampler, "epoch", None)})
        auto = self._auto_collation

        def truncated() -> Any:
            for item in stream[:batches]:
                if auto:
                    yield self.collate_fn([self.dataset[i] for i in item])
                else:
                    yield self.collate_fn(self.dataset[item])

        return truncated()

    DataLoader.__iter__ = __iter__
    state.stop_on_capture = False
    outcome = run_user_code(state, spec)
    if state.target is not None:
        loader = state.target_instance
        sampler = loader.sampler
        is_dist = isinstance(sampler, DistributedSampler)
        info.update(
            _sampler_facts(loader, f"{type(sampler).__module__}.{type(sampler).__qualname__}",
                           is_dist),
            shuffle=getattr(sampler, "shuffle", None) if is_dist
            else type(sampler).__name__ == "RandomSampler",
            num_replicas=getattr(sampler, "num_replicas", None),
            padded=(getattr(sampler, "total_size", 0) - len(loader.dataset)) if is_dist else 0,
            target_index=state.target,
        )
        if outcome.get("outcome") == "crashed":
            info["notes"].append(f"the script crashed inside its loop ({outcome['type']}: "
                                 f"{outcome['message']}); the epochs before it were compared")
    info["outcome"] = outcome
    return info


def run_ddp_sim(torch: Any, state: State) -> dict[str, Any]:
    """No process group: capture the loader once, then derive each rank's
    indices from ``DistributedSampler(num_replicas=N, rank=r)`` with the
    script's own sampler settings (or the full stream for every rank when
    the script has no DistributedSampler)."""
    from torch.utils.data.distributed import DistributedSampler

    n = int(state.spec["ddp"]["nproc"])
    import torch.distributed as dist

    # Enough of a process group for the script to reach its loader on a
    # machine without CUDA/NCCL: rank 0 of a world of 1, devices ignored.
    dist.init_process_group = lambda *a, **k: None
    dist.get_world_size = lambda *a, **k: 1
    dist.get_rank = lambda *a, **k: 0
    dist.barrier = lambda *a, **k: None
    torch.cuda.set_device = lambda *a, **k: None
    state.stop_on_capture = True
    outcome = run_user_code(state, state.spec)
    if state.target is None:
        return {"outcome": outcome}
    loader = state.target_instance
    ranks = []
    sampler = loader.sampler
    is_dist = isinstance(sampler, DistributedSampler)
    for r in range(n):
        if is_dist:
            s = DistributedSampler(loader.dataset, num_replicas=n, rank=r, shuffle=sampler.shuffle,
                                   seed=sampler.seed, drop_last=sampler.drop_last)
            epochs = []
            for e in range(2):
                s.set_epoch(e)
                epochs.append({"indices": list(iter(s))})
            padded = s.total_size - len(loader.dataset)
        else:
            torch.manual_seed(0)
            epochs = [{"indices": _flatten_indices(iter(loader._index_sampler), 10**6)}]
            padded = 0
        ranks.append({"rank": r, "world_size": n, "epochs": epochs, "set_epoch": [],
                      "simulated": True, **_sampler_facts(loader, type(sampler).__name__, is_dist),
                      "shuffle": getattr(sampler, "shuffle", None), "padded": padded,
                      "notes": []})
    return {"outcome": outcome, "ranks": ranks}
