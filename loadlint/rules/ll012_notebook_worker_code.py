from __future__ import annotations

from typing import Iterator

import libcst as cst

from loadlint.facts.datasets import helper, passed_for
from loadlint.facts.loaders import LoaderCall
from loadlint.facts.names import ClassFacts, FunctionFacts
from loadlint.rules.base import Context, Report, Rule, Scope
from loadlint.rules.shared import module_spawn_reason, workers_on


#: How deep wrappers are followed: ``Subset(ConcatDataset([MyDataset()]))``.
_MAX_DEPTH = 6


def defined_here(ctx: Context, expr: cst.BaseExpression | None, scope: Scope | None, depth: int = 0) -> str | None:
    """The name of a module-level ``class`` or ``def`` of this module that the
    value is, is an instance of, or carries inside (a wrapper's argument, a
    bound method, a ``functools.partial``), also through a helper of this
    module that returns it or receives it as an argument.  Such objects are
    pickled by reference to ``__main__`` when the module is the notebook
    itself.

    Lambdas and nested definitions are left to LL007: they cannot be pickled
    anywhere, so they are not a notebook problem."""
    if expr is None or scope is None or depth > _MAX_DEPTH:
        return None
    if type(expr) is cst.Name:
        definition = ctx.names.definition(expr.value, scope)
        if isinstance(definition, (FunctionFacts, ClassFacts)):
            return None if definition.nested else definition.name
        target, owner = ctx.follow(expr, scope)
        if target is not expr:
            return defined_here(ctx, target, owner, depth + 1)
        # A helper's parameter: what this module's calls of the helper pass.
        for value, value_scope in passed_for(ctx.names, ctx.datasets, expr.value, scope):
            found = defined_here(ctx, value, value_scope, depth + 1)
            if found:
                return found
        return None
    if type(expr) is cst.Call:
        if type(expr.func) is cst.Name:
            definition = ctx.names.definition(expr.func.value, scope)
            if isinstance(definition, ClassFacts):
                return None if definition.nested else definition.name
        # A helper of this module builds it: what the helper returns.
        built_by = helper(ctx.names, expr, scope)
        if built_by is not None:
            for returned in ctx.datasets.returns.get(built_by, ()):
                found = defined_here(ctx, returned, built_by.scope, depth + 1)
                if found:
                    return found
        for arg in expr.args:
            found = defined_here(ctx, arg.value, scope, depth + 1)
            if found:
                return found
        return None
    if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
        for element in expr.elements:
            found = defined_here(ctx, element.value, scope, depth + 1)
            if found:
                return found
        return None
    if type(expr) is cst.Attribute:
        return defined_here(ctx, expr.value, scope, depth + 1)
    return None


def notebook_definitions(ctx: Context, call: LoaderCall) -> list[tuple[str, str]]:
    """(name, what it is to the loader) for each worker-side object that is
    defined in this module."""
    out = []
    for param in ("dataset", "collate_fn", "worker_init_fn"):
        name = defined_here(ctx, call.expr(param), call.scope_of(param))
        if name is None:
            continue
        if param == "dataset":
            _, cls = ctx.dataset_class(call)
            what = "the dataset's class" if cls is not None and cls.name == name else "inside the dataset"
        else:
            what = f"`{param}`"
        out.append((name, what))
    return out


def _workers(n: int) -> str:
    return "its worker" if n == 1 else f"its {n} workers"


class NotebookWorkerCode(Rule):
    """
    ## What it does
    Checks notebooks for a `DataLoader` with workers whose Dataset class,
    `collate_fn` or `worker_init_fn` (or a transform inside the dataset) is
    defined in the notebook itself, when the workers may start with spawn
    or forkserver.  It follows the dataset through variables and through
    the notebook's helpers: a function that builds and returns it, or a
    function that builds the loader from its parameter (with what the
    notebook's calls pass); what it cannot trace stays silent.

    ## Why is this bad?
    A spawned or forkserver worker is a fresh Python process: it receives the
    dataset and the functions by pickle, and pickle stores a class or
    function by reference, as `__main__.FaceDataset`.  In a notebook,
    `__main__` is the kernel, which the worker cannot import, so the first
    batch fails with

    ```text
    AttributeError: Can't get attribute 'FaceDataset' on <module '__main__' (built-in)>
    ```

    (or the worker dies and the DataLoader reports that it "exited
    unexpectedly").  macOS and Windows always spawn; Linux starts workers
    with forkserver from Python 3.14.  The start method comes from
    `multiprocessing_context`, `set_start_method(...)`, or the target's
    `platform` and `python` (`--target`, `[tool.loadlint.target]`); without
    a declared platform the portable answer applies and the rule reports.
    It is silent with `multiprocessing_context="fork"`.

    Lambdas and functions defined inside functions cannot be pickled in any
    module; LL007 reports them.

    ## Example
    ```python
    # cell 1
    from torch.utils.data import DataLoader, Dataset

    class FaceDataset(Dataset):
        def __len__(self):
            return 100

        def __getitem__(self, i):
            return i

    # cell 2
    loader = DataLoader(FaceDataset(), batch_size=8, num_workers=4)
    ```

    Use instead:
    ```python
    # cell 1
    from torch.utils.data import DataLoader
    from faces import FaceDataset  # faces.py, beside the notebook

    # cell 2
    loader = DataLoader(FaceDataset(), batch_size=8, num_workers=4)
    ```

    or keep the definitions in the notebook and load in the kernel process,
    with `num_workers=0`.

    ## Fix safety
    There is no automatic fix: moving code to a module and choosing between
    the two ways out are decisions for the author.

    ## References
    - [PyTorch: Platform-specific behaviors](https://pytorch.org/docs/stable/data.html#platform-specific-behaviors)
    - [Python: multiprocessing, the spawn and forkserver start methods](https://docs.python.org/3/library/multiprocessing.html#contexts-and-start-methods)
    - [Python 3.14: forkserver becomes the default on Linux](https://docs.python.org/3.14/whatsnew/3.14.html#multiprocessing)
    """

    code = "LL012"
    name = "notebook-worker-code"
    category = "crash"
    summary = "workers under spawn/forkserver cannot import a Dataset, `collate_fn` or `worker_init_fn` defined in the notebook"
    needs_hardware = True
    hazard_order = 2

    def worker_hazards(self, ctx: Context, call: LoaderCall) -> list[str]:
        """A fix turning workers on is unsafe in a notebook whose code the
        workers would have to import."""
        found = notebook_definitions(ctx, call) if ctx.is_notebook else []
        why = module_spawn_reason(ctx, call) if found else None
        if why is None:
            return []
        names = ", ".join(f"`{name}`" for name, _ in found)
        return [f"{names} defined in the notebook cannot be imported by spawned workers ({why})"]

    def check(self, ctx: Context) -> Iterator[Report]:
        if not ctx.is_notebook:
            return
        for call in ctx.calls:
            if not workers_on(call):
                continue
            found = notebook_definitions(ctx, call)
            if not found:
                continue
            why = module_spawn_reason(ctx, call)
            if why is None:
                continue
            names = ", ".join(f"`{name}` ({what})" for name, what in found)
            verb = "is" if len(found) == 1 else "are"
            first = found[0][0]
            yield Report(
                call.node,
                f"{names} {verb} defined in the notebook, but {_workers(call.workers())} may start with spawn or "
                f"forkserver ({why}) and cannot import `__main__`: the first batch fails with "
                f"`AttributeError: Can't get attribute '{first}' on <module '__main__'>`; "
                "move the definitions to a `.py` module and import them, or use `num_workers=0` in the notebook",
            )
