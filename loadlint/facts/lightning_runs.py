"""Lightning across modules: the Lightning classes a module defines, and
what it hands to a Trainer that certainly uses the GPU.

A ``LightningDataModule`` (or a ``LightningModule`` with ``*_dataloader``
hooks) is often defined in one module and fitted in another:
``trainer = L.Trainer(accelerator="gpu")`` then ``trainer.fit(model,
datamodule=dm)``.  The summary records, for each such run, the callees
(qualified as the summary's calls are) whose results are handed to it, so
that project analysis can link the class's loaders to the GPU.
"""

from __future__ import annotations

from typing import Callable

import libcst as cst

from loadlint.facts.calls import CallSite
from loadlint.facts.collect import ModuleFacts
from loadlint.facts.distributed import LIGHTNING_RUNS, LIGHTNING_TRAINERS, is_lightning_class, lightning_accelerator
from loadlint.facts.resolve import Scope, canonical, dotted_name
from loadlint.types import GpuRun


def lightning_classes(facts: ModuleFacts) -> list[str]:
    """Module-level classes with a Lightning base (whose hooks a Trainer calls)."""
    names = facts.names
    module = id(names.module_scope)
    return sorted(cls.name for (owner, _), cls in names.class_defs.items() if owner == module and is_lightning_class(cls.bases))


def gpu_runs(facts: ModuleFacts, imports: dict[str, str], module_defs: set[str], ref_of: Callable[[cst.CSTNode], int]) -> list[GpuRun]:
    """``trainer.fit(model, datamodule=dm)`` where ``trainer`` is bound once
    to a Lightning ``Trainer`` whose accelerator is the GPU: what it is
    handed (a call's result, directly or through a name bound once)."""
    out: list[GpuRun] = []
    for site in facts.calls_between.sites:
        head, _, method = site.callee.rpartition(".")
        if method not in LIGHTNING_RUNS or "." in head or not head or _in_test(site):
            continue
        accelerator = _trainer(facts, head, site.scope)
        if accelerator is None:
            continue
        handed = []
        for arg in site.node.args:
            if arg.star:
                break
            callee = _made_by(arg.value, site.scope, imports, module_defs)
            if callee is not None:
                handed.append(callee)
        if handed:
            out.append({"at": ref_of(site.node), "accelerator": accelerator, "method": method, "handed": handed})
    return out


def _in_test(site: CallSite) -> bool:
    return site.function is not None and site.function.name.startswith("test")


def _single_value(name: str, scope: Scope) -> tuple[cst.BaseExpression, Scope] | None:
    found = scope.lookup(name)
    if found is None or len(found[1]) != 1 or found[1][0].value is None:
        return None
    return found[1][0].value, found[0]


def _trainer(facts: ModuleFacts, name: str, scope: Scope) -> str | None:
    """The accelerator of the GPU ``Trainer`` that ``name`` is bound to, once."""
    found = _single_value(name, scope)
    if found is None:
        return None
    call, owner = found
    if not isinstance(call, cst.Call):
        return None
    qualified = canonical(facts.names.imports.qualify(call.func))
    if qualified not in LIGHTNING_TRAINERS:
        return None
    return lightning_accelerator(call, owner)


def _made_by(expr: cst.BaseExpression, scope: Scope, imports: dict[str, str], module_defs: set[str]) -> str | None:
    """The qualified callee whose result ``expr`` is: ``data.MNISTDataModule``
    for ``MNISTDataModule()`` or a name bound once to it; ``:name`` for a
    module-level definition."""
    if type(expr) is cst.Name:
        found = _single_value(expr.value, scope)
        if found is None:
            return None
        expr = found[0]
    if type(expr) is not cst.Call:
        return None
    dotted = dotted_name(expr.func)
    if dotted is None:
        return None
    head, _, rest = dotted.partition(".")
    if head in imports:
        return imports[head] + ("." + rest if rest else "")
    if head in module_defs and not rest:
        return ":" + head
    return None
