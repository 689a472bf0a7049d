from __future__ import annotations

from typing import Iterator

from loadlint.facts.accelerator import device_kind
from loadlint.rules.base import Context, Report, Rule


class XlaWithoutDeviceLoader(Rule):
    """
    ## What it does
    Checks for loaders whose batches are moved one by one to an XLA device
    (`xm.xla_device()`, `torch_xla.device()`) with `.to(device)` in the
    loop, in a module that never wraps a loader in `MpDeviceLoader` or
    `ParallelLoader`.

    ## Why is this bad?
    On TPUs and other XLA devices, the per-batch `.to(device)` happens
    synchronously between graph executions.  `MpDeviceLoader` uploads the
    next batches in a background thread while the device computes, and
    marks the step boundaries for you; the PyTorch/XLA guide uses it for
    every training loop.

    ## Example
    ```python
    device = xm.xla_device()
    for x, y in loader:
        x, y = x.to(device), y.to(device)
    ```

    Use instead:
    ```python
    device = xm.xla_device()
    for x, y in pl.MpDeviceLoader(loader, device):
        ...
    ```

    ## Fix safety
    No fix is offered: wrapping the loader also changes where batches live
    when they reach the loop body.

    ## References
    - [PyTorch/XLA API guide: `MpDeviceLoader`](https://github.com/pytorch/xla/blob/master/API_GUIDE.md)
    """

    code = "LL210"
    name = "xla-without-device-loader"
    category = "performance"
    summary = "batches moved to an XLA device one by one instead of through `MpDeviceLoader`"

    def check(self, ctx: Context) -> Iterator[Report]:
        if ctx.accelerator.xla_loader or not ctx.accelerator.xla:
            return
        for call in ctx.calls:
            keys = ctx.keys_of(call)
            moved = [
                t for t in ctx.iteration.transfers
                if t.key in keys and t.method == "to" and device_kind(t.device, t.scope, ctx.names.imports) == "xla"
            ]
            if not moved:
                continue
            message = (
                "batches of this loader are moved to the XLA device one by one: the upload cannot overlap compute; "
                "iterate `torch_xla.distributed.parallel_loader.MpDeviceLoader(loader, device)` instead"
            )
            yield Report(call.node, message)
