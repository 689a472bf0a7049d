from __future__ import annotations

from typing import Iterator

import libcst as cst

from loadlint.facts.values import UNKNOWN
from loadlint.rules.base import CallChange, Context, FixSpec, Report, Rule
from loadlint.rules.shared import code_of


class ManualPinInLoop(Rule):
    """
    ## What it does
    Checks for `.pin_memory()` called on a loader's batches inside the loop
    that iterates it.

    ## Why is this bad?
    `.pin_memory()` in the loop copies each batch into page-locked memory on
    the training thread, synchronously, before the transfer: the GPU waits
    for an extra host copy.  The DataLoader does the same copy in a
    background thread when created with `pin_memory=True`, overlapping it
    with compute.  The pinning tutorial measures the manual pattern as up to
    twice as slow as a plain copy.

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=32, num_workers=4)
    for x in loader:
        x = x.pin_memory().to(device, non_blocking=True)
    ```

    Use instead:
    ```python
    loader = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True)
    for x in loader:
        x = x.to(device, non_blocking=True)
    ```

    ## Fix safety
    The fix removes the `.pin_memory()` calls and sets `pin_memory=True` on
    the loader, which pins the same tensors (tensors in lists, tuples, dicts
    and objects with a `pin_memory()` method) in its pin thread.  It is
    safe, except when the loader's `pin_memory` is an expression that cannot
    be resolved (the fix replaces it): then it is unsafe.

    ## References
    - [A guide on good usage of non_blocking and pin_memory()](https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html)
    - [PyTorch: Memory pinning](https://pytorch.org/docs/stable/data.html#memory-pinning)
    """

    code = "LL211"
    name = "manual-pin-in-loop"
    category = "performance"
    summary = "`.pin_memory()` on batches in the loop instead of the loader's pin thread"
    fix_availability = "always"

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.calls:
            keys = ctx.keys_of(call)
            pins = [t.node for t in ctx.iteration.transfers if t.key in keys and t.method == "pin_memory"]
            if not pins:
                continue
            message = (
                "`.pin_memory()` on this loader's batches in the loop pins on the training thread, synchronously; "
                "let the DataLoader pin in its background thread with `pin_memory=True`"
            )
            value = call.value("pin_memory")
            replace: list[tuple[cst.CSTNode, str]] = [
                (node, code_of(node.func.value)) for node in pins if not node.args and type(node.func) is cst.Attribute
            ]
            changes = [] if value is True else [CallChange(call.node, {"pin_memory": "True"})]
            fix = FixSpec(
                "unsafe" if value is UNKNOWN else "safe",
                "Remove `.pin_memory()` and set `pin_memory=True`",
                calls=changes,
                replace=replace,
            )
            yield Report(call.node, message, fix if replace else None)
