from __future__ import annotations

from typing import Iterator

import libcst as cst

from loadlint.facts.datasets import helper, passed_for
from loadlint.facts.loaders import LoaderCall
from loadlint.facts.names import ClassFacts, FunctionFacts
from loadlint.rules.base import Context, Invalid, Report, Rule, Scope, Valid
from loadlint.rules.shared import module_spawn_reason, workers_on
from loadlint.types import HardwareProfile

_MACOS = HardwareProfile(usable_cpus=8, gpu_count=0, platform="macos", declared=frozenset({"cpus", "gpus", "platform"}))

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

    VALID = [
        # Imported from a module: the workers import it too.
        Valid(
            """
            from torch.utils.data import DataLoader
            from faces import FaceDataset
            loader = DataLoader(FaceDataset(), batch_size=8, num_workers=4, multiprocessing_context="spawn")
            """,
            path="example.ipynb",
        ),
        # No workers: everything runs in the kernel.
        Valid(
            """
            from torch.utils.data import DataLoader, Dataset
            class FaceDataset(Dataset):
                def __getitem__(self, i):
                    return i
            loader = DataLoader(FaceDataset(), batch_size=8, num_workers=0, multiprocessing_context=None)
            """,
            path="example.ipynb",
        ),
        # fork copies the kernel's memory: notebook classes are there.
        Valid(
            """
            from torch.utils.data import DataLoader, Dataset
            class FaceDataset(Dataset):
                def __getitem__(self, i):
                    return i
            loader = DataLoader(FaceDataset(), num_workers=4, multiprocessing_context="fork")
            """,
            path="example.ipynb",
        ),
        # Linux before Python 3.14 forks by default (the examples' profile).
        Valid(
            """
            from torch.utils.data import DataLoader, Dataset
            class FaceDataset(Dataset):
                def __getitem__(self, i):
                    return i
            loader = DataLoader(FaceDataset(), num_workers=4)
            """,
            path="example.ipynb",
        ),
        # A script's classes live in an importable module (LL013 is about its guard).
        Valid(
            """
            from torch.utils.data import DataLoader, Dataset
            class FaceDataset(Dataset):
                def __getitem__(self, i):
                    return i
            loader = DataLoader(FaceDataset(), num_workers=4, multiprocessing_context="spawn")
            """,
        ),
        # A lambda is LL007's finding, in notebooks and scripts alike.
        Valid(
            """
            from torch.utils.data import DataLoader
            from faces import FaceDataset
            loader = DataLoader(FaceDataset(), num_workers=2, collate_fn=lambda b: b, multiprocessing_context="spawn")
            """,
            path="example.ipynb",
        ),
        # A helper that receives an imported dataset, or one whose result
        # cannot be traced (a parameter): silent.
        Valid(
            """
            from torch.utils.data import DataLoader
            from faces import FaceDataset
            def make_loader(dataset):
                return DataLoader(dataset, batch_size=8, num_workers=4, multiprocessing_context="spawn")
            def wrap(ds):
                return ds
            train = make_loader(FaceDataset())
            loader = DataLoader(wrap(source), num_workers=4, multiprocessing_context="spawn")
            """,
            path="example.ipynb",
        ),
        # Unresolved worker count: silent.
        Valid(
            """
            from torch.utils.data import DataLoader, Dataset
            class FaceDataset(Dataset):
                def __getitem__(self, i):
                    return i
            loader = DataLoader(FaceDataset(), num_workers=args.workers, multiprocessing_context="spawn")
            """,
            path="example.ipynb",
        ),
    ]
    INVALID = [
        Invalid(
            """
            from torch.utils.data import DataLoader, Dataset
            class FaceDataset(Dataset):
                def __len__(self):
                    return 100
                def __getitem__(self, i):
                    return i
            ds = FaceDataset()
            loader = DataLoader(ds, batch_size=8, num_workers=4)
            """,
            message="`FaceDataset` (the dataset's class) is defined in the notebook, but its 4 workers may start with "
            "spawn or forkserver (the target platform is macos, where workers are spawned) and cannot import "
            "`__main__`: the first batch fails with `AttributeError: Can't get attribute 'FaceDataset' on "
            "<module '__main__'>`; move the definitions to a `.py` module and import them, or use `num_workers=0` "
            "in the notebook",
            profile=_MACOS,
            line=8,
            path="example.ipynb",
        ),
        Invalid(
            """
            import torch
            from faces import FaceDataset
            def pad_collate(batch):
                return batch
            loader = torch.utils.data.DataLoader(
                FaceDataset(), batch_size=8, num_workers=2, collate_fn=pad_collate, multiprocessing_context="spawn"
            )
            """,
            message=None,
            line=5,
            path="example.ipynb",
        ),
        # Built by a helper of the notebook, and passed to one.
        Invalid(
            """
            from torch.utils.data import DataLoader, Dataset
            class FaceDataset(Dataset):
                def __getitem__(self, i):
                    return i
            def make_dataset(root):
                return FaceDataset(root)
            def make_loader(dataset):
                return DataLoader(dataset, batch_size=8, num_workers=4, multiprocessing_context="spawn")
            train = make_dataset("train")
            loader = DataLoader(train, num_workers=4, multiprocessing_context="spawn")
            val = make_loader(FaceDataset("val"))
            """,
            count=2,
            path="example.ipynb",
        ),
        # Inside the dataset: a transform class of the notebook.
        Invalid(
            """
            from torch.utils.data import DataLoader
            from torchvision import datasets, transforms
            class AddNoise:
                def __call__(self, x):
                    return x
            tf = transforms.Compose([transforms.ToTensor(), AddNoise()])
            train = datasets.MNIST("data", train=True, transform=tf)
            loader = DataLoader(train, batch_size=64, num_workers=2, multiprocessing_context="forkserver")
            """,
            line=8,
            path="example.ipynb",
        ),
        # A worker_init_fn through functools.partial, and no declared platform.
        Invalid(
            """
            import functools
            from torch.utils.data import DataLoader
            from faces import FaceDataset
            def seed_worker(worker_id, base):
                pass
            loader = DataLoader(FaceDataset(), num_workers=2, worker_init_fn=functools.partial(seed_worker, base=0))
            """,
            profile=HardwareProfile(usable_cpus=4, gpu_count=0),
            path="example.ipynb",
        ),
        # Through Subset, with set_start_method("spawn").
        Invalid(
            """
            import torch.multiprocessing as mp
            from torch.utils.data import DataLoader, Dataset, Subset
            mp.set_start_method("spawn", force=True)
            class FaceDataset(Dataset):
                def __getitem__(self, i):
                    return i
            loader = DataLoader(Subset(FaceDataset(), range(10)), num_workers=2)
            """,
            path="example.ipynb",
        ),
    ]
