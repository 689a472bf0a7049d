from __future__ import annotations

from typing import Iterator

from loadlint.facts.accelerator import device_kind
from loadlint.facts.iteration import plain_copy
from loadlint.rules.base import CallChange, Context, FixSpec, Report, Rule
from loadlint.rules.project_context import ProjectContext, ProjectReport
from loadlint.rules.shared import is_truthy


def blocking_copy(method: str | None, non_blocking: bool, plain: bool, device: str | None) -> bool:
    """A copy of a batch to the GPU that waits for the transfer: without
    ``non_blocking=True``, with arguments the fix can extend
    (``facts.iteration.plain_copy``), to CUDA (``.to``'s ``device`` kind;
    ``.cuda()`` and a CUDA tensor type are copies to it)."""
    if non_blocking or method == "pin_memory" or not plain:
        return False
    return method != "to" or device == "cuda"


def message(method: str, where: str = "") -> str:
    """The finding's text; ``where``: the loader's place, across files."""
    return (
        f"`.{method}()` of a pinned batch without `non_blocking=True`: the copy blocks and cannot overlap compute, "
        "so pinning buys nothing; pass `non_blocking=True`" + (f" ({where})" if where else "")
    )


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
                device = device_kind(transfer.device, transfer.scope, ctx.names.imports, at=transfer.point) if transfer.method == "to" else None
                if not blocking_copy(transfer.method, False, plain_copy(node, transfer.method), device):
                    continue
                fix = FixSpec("safe", "Pass `non_blocking=True`", calls=[CallChange(node, {"non_blocking": "True"})])
                yield Report(node, message(transfer.method), fix)

    def check_project(self, project: ProjectContext) -> Iterator[ProjectReport]:
        """The batches of a pinned loader copied in another function (where
        the loader is passed or returned to), the device followed through
        the callers' values."""
        for flow in project.loaders:
            if not flow.setting("pin_memory").is_(True):
                continue
            for use in flow.uses:
                # In the loader's own function the file's LL205 decides, unless
                # the device is a parameter: then only its callers know it.
                passed = use.device_param
                if use.kind != "transfer" or use.here and passed is None or use.method is None:
                    continue
                if not blocking_copy(use.method, use.non_blocking, use.plain, use.device if use.method == "to" else None):
                    continue
                where = f"the loader is built at {flow.place}"
                if passed is not None and use.here:
                    where = f"{where}; with a CUDA `{passed}`; `{use.function}` {use.calls}"
                change = (use.at, {"non_blocking": "True"}, "safe", "Pass `non_blocking=True`")
                yield ProjectReport(use.path, use.at, message(use.method, where), change)
