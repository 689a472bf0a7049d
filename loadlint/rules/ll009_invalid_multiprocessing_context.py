from __future__ import annotations

from typing import Iterator

import libcst as cst

from loadlint.facts.values import MISSING, UNKNOWN
from loadlint.facts.arguments import context_method
from loadlint.rules.base import CallChange, Context, FixSpec, Report, Rule
from loadlint.rules.shared import value_text, workers_text, written_in_call

_METHODS = ("fork", "spawn", "forkserver")


class InvalidMultiprocessingContext(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls whose `multiprocessing_context` torch
    rejects: any context with `num_workers` missing or `0`; a string that is
    not a start method (`fork`, `spawn`, `forkserver`); `"fork"` or
    `"forkserver"` on a Windows target; a value that is neither a string nor
    a context.

    ## Why is this bad?
    The constructor raises:

    ```
    ValueError: multiprocessing_context can only be used with multi-process loading (num_workers > 0), but got num_workers=0
    ValueError: multiprocessing_context option should specify a valid start method in ['fork', 'spawn', 'forkserver'], but got multiprocessing_context='threads'
    TypeError: multiprocessing_context option should be a valid context object or a string specifying the start method, but got multiprocessing_context=3
    ```

    Windows only has `spawn`, so `"fork"` there fails with the second
    message, listing `['spawn']`.

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=32, num_workers=0, multiprocessing_context="spawn")
    ```

    Use instead:
    ```python
    loader = DataLoader(dataset, batch_size=32, num_workers=0)
    ```

    ## Fix safety
    With no workers the fix removes `multiprocessing_context`; it is safe,
    since no process is started.  An unknown or unavailable start method has
    no fix: the intended one cannot be guessed.

    ## References
    - [PyTorch: Multi-process data loading](https://pytorch.org/docs/stable/data.html#multi-process-data-loading)
    - [multiprocessing: Contexts and start methods](https://docs.python.org/3/library/multiprocessing.html#contexts-and-start-methods)
    """

    code = "LL009"
    name = "invalid-multiprocessing-context"
    category = "crash"
    summary = "`multiprocessing_context` without workers, or not a start method of the target (ValueError)"
    fix_availability = "sometimes"
    needs_hardware = True

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.calls:
            expr = call.expr("multiprocessing_context")
            if expr is None:
                continue
            method = context_method(expr, call.scope_of("multiprocessing_context"))
            if method is None:
                continue
            shown = value_text(call, "multiprocessing_context")
            workers = call.workers()
            if type(workers) is int and workers == 0 and (method is not UNKNOWN or type(expr) is cst.Call):
                fix = None
                if written_in_call(call, "multiprocessing_context"):
                    fix = FixSpec(
                        "safe",
                        "Remove `multiprocessing_context`",
                        calls=[CallChange(call.node, remove=("multiprocessing_context",))],
                    )
                yield Report(call.node, (
                    f"{shown} {workers_text(call)} raises ValueError at construction: a start method only applies to "
                    "worker processes; remove it or start workers"
                ), fix)
                continue
            if method is UNKNOWN or method is MISSING:
                continue
            if not isinstance(method, str):
                yield Report(call.node, f"{shown} raises TypeError at construction: pass a start method name "
                             "(\"fork\", \"spawn\", \"forkserver\") or a multiprocessing context")
            elif method not in _METHODS:
                yield Report(call.node, f"{shown} raises ValueError at construction: it is not a start method; "
                             "use \"spawn\", \"forkserver\" or \"fork\"")
            elif method != "spawn" and ctx.profile.platform == "windows":
                yield Report(call.node, f'{shown} raises ValueError at construction on Windows, which only has '
                             f'"spawn"; use "spawn" ({ctx.profile.label})')
