from __future__ import annotations

from typing import Iterator

from loadlint.facts.accelerator import device_kind
from loadlint.facts.iteration import plain_copy
from loadlint.rules.base import CallChange, Context, FixSpec, Report, Rule
from loadlint.rules.shared import is_truthy


class BlockingTransfer(Rule):
    """
    ## What it does
    Checks for batches of a `pin_memory=True` loader moved to the GPU with
    `.cuda()`, `.to(<CUDA device>)` or `.type(torch.cuda.FloatTensor)` (any
    `torch.cuda.*Tensor` type) without `non_blocking=True`.  The finding is
    reported at the call.

    ## Why is this bad?
    Pinning exists so that the host-to-device copy can run asynchronously
    and overlap with compute.  A blocking copy waits for the transfer to
    finish before the next line runs, so the pinning (and the pin thread the
    DataLoader runs for it) buys almost nothing.  The tuning guide pairs the
    two: `pin_memory=True` in the loader, `non_blocking=True` in the copy.

    Only CUDA destinations are reported (a device written as `"cuda"`,
    `torch.device("cuda")`, or a name bound to one, also
    `"cuda" if available else "cpu"`); MPS and XLA are not.  Project
    analysis applies the same test to a pinned loader's batches in the
    functions it is passed or returned to, in any module, the device
    followed through the callers' arguments.

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True)
    for x, y in loader:
        x, y = x.cuda(), y.to(device)
    ```

    Use instead:
    ```python
    loader = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True)
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.to(device, non_blocking=True)
    ```

    ## Fix safety
    The fix adds `non_blocking=True`.  It is safe for host-to-device copies:
    CUDA orders the copy before any kernel that uses the tensor on the same
    stream.

    ## References
    - [A guide on good usage of non_blocking and pin_memory()](https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html)
    - [Performance Tuning Guide](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html)
    """

    code = "LL205"
    name = "blocking-transfer"
    category = "performance"
    across_files = True
    summary = "pinned batches copied to the GPU without `non_blocking=True`"
    fix_availability = "always"

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.calls:
            if is_truthy(call.value("pin_memory")) is not True:
                continue
            keys = ctx.keys_of(call)
            for transfer in ctx.iteration.transfers:
                if transfer.key not in keys or transfer.non_blocking or transfer.method == "pin_memory":
                    continue
                node = transfer.node
                if not plain_copy(node, transfer.method):
                    continue
                if transfer.method == "to" and device_kind(transfer.device, transfer.scope, ctx.names.imports) != "cuda":
                    continue
                message = (
                    f"`.{transfer.method}()` of a pinned batch without `non_blocking=True`: the copy blocks and cannot "
                    "overlap compute, so pinning buys nothing; pass `non_blocking=True`"
                )
                fix = FixSpec("safe", "Pass `non_blocking=True`", calls=[CallChange(node, {"non_blocking": "True"})])
                yield Report(node, message, fix)
