"""Helpers several rules share: the worker suggestion and the hazards that
make turning workers on unsafe."""

from __future__ import annotations

import libcst as cst

from loadlint.callsites import LoaderCall, ModuleInfo
from loadlint.hardware import ranks_per_node, suggest_num_workers
from loadlint.resolve import evaluate, follow_name
from loadlint.rules.base import Context


def ranks(ctx: Context) -> int:
    return ranks_per_node(ctx.profile, ctx.distributed)


def suggested_workers(ctx: Context, call: LoaderCall) -> int:
    batch = call.effective("batch_size")
    batch_size = batch if type(batch) is int and batch > 0 else None
    return suggest_num_workers(ctx.profile, ranks(ctx), batch_size)


def profile_note(ctx: Context) -> str:
    note = ctx.profile.label
    if ctx.distributed and ranks(ctx) > 1:
        note += f", {ranks(ctx)} ranks per node"
    return note


def unpicklable_callable(expr: cst.BaseExpression | None, call: LoaderCall) -> str | None:
    """Why a worker callable cannot be pickled for spawn/forkserver workers."""
    if expr is None:
        return None
    if isinstance(expr, cst.Lambda):
        return "is a lambda"
    if isinstance(expr, cst.Name):
        found = call.scope.lookup(expr.value)
        if found is not None and found[0].kind == "function":
            target, _ = follow_name(expr, call.scope)
            if isinstance(target, cst.Lambda):
                return "is a lambda"
            return "is defined inside a function"
    return None


def dataset_class_facts(info: ModuleInfo, call: LoaderCall):
    _, cls = info.dataset_class(call)
    return cls


def dataset_touches_cuda(info: ModuleInfo, call: LoaderCall) -> bool:
    cls = dataset_class_facts(info, call)
    if cls is None:
        return False
    return any(
        facts.cuda for name, facts in cls.methods.items() if name in ("__init__", "__getitem__", "__getitems__", "__iter__")
    )


def worker_hazards(ctx: Context, call: LoaderCall) -> list[str]:
    """Reasons why starting workers at this call may crash or duplicate data."""
    reasons = []
    for param in ("collate_fn", "worker_init_fn"):
        why = unpicklable_callable(call.expr(param), call)
        if why:
            reasons.append(f"`{param}` {why} (cannot be pickled for spawn/forkserver workers)")
    if dataset_touches_cuda(ctx.info, call):
        reasons.append("the Dataset uses CUDA (workers cannot initialise CUDA after fork)")
    cls = dataset_class_facts(ctx.info, call)
    if cls is not None and ctx.info.is_iterable_dataset(call):
        if not any(m.calls_get_worker_info for m in cls.methods.values()) and not call.has("worker_init_fn"):
            reasons.append("the IterableDataset does not shard by worker (every worker would yield every sample)")
    return reasons


def is_truthy(value: object) -> bool | None:
    """Python truthiness of a known value; None when unknown."""
    from loadlint.resolve import MISSING, UNKNOWN

    if value is UNKNOWN or value is MISSING:
        return None
    return bool(value)


__all__ = [
    "dataset_touches_cuda",
    "evaluate",
    "is_truthy",
    "profile_note",
    "ranks",
    "suggested_workers",
    "unpicklable_callable",
    "worker_hazards",
]
