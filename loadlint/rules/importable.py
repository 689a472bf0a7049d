"""Whether spawned workers could import what a notebook's loader hands them.

A worker started with spawn or forkserver unpickles the dataset, and pickle
finds a class by its module: a class of a notebook lives in the kernel's
``__main__``, which no worker can import.  A fix that starts workers is
withheld where the dataset's class is the notebook's, or cannot be traced
to a construction at all (a parameter no call passes, an entry of a
container picked at run time from something untraced): "probably
importable" is not safe.
"""

from __future__ import annotations

from loadlint.facts.dataset_sources import dataset_sources
from loadlint.facts.loaders import LoaderCall
from loadlint.rules.base import Context
from loadlint.rules.ll012_notebook_worker_code import notebook_definitions
from loadlint.rules.shared import code_of, module_spawn_reason


def unimportable_dataset(ctx: Context, call: LoaderCall) -> str | None:
    """Why a fix starting workers at a notebook's loader is withheld; None
    outside notebooks, where workers certainly fork, or when everything the
    workers receive is traced to an importable module."""
    if not ctx.is_notebook:
        return None
    why = module_spawn_reason(ctx, call)
    if why is None:
        return None
    sources = dataset_sources(ctx.names, ctx.datasets, call)
    local = [name for name, _ in notebook_definitions(ctx, call)]
    local += [name for name in sources.local if name not in local]
    if local:
        names = ", ".join(f"`{name}`" for name in local)
        return (
            f"no fix: {names} defined in the notebook cannot be imported by workers started with spawn or "
            f"forkserver ({why}); move the definitions to a `.py` module and import them first (LL012)"
        )
    if sources.traced:
        return None
    expr = call.expr("dataset")
    shown = f"`{code_of(expr)}`" if expr is not None else "the dataset"
    return (
        f"no fix: the class of {shown} is not traced to an importable module, and workers started with spawn or "
        f"forkserver ({why}) cannot import a class defined in the notebook; build the dataset from a class "
        "imported from a `.py` module where the loader is built"
    )
