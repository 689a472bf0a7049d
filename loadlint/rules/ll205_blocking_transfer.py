from __future__ import annotations

from typing import Iterator

from loadlint.facts.accelerator import device_kind
from loadlint.facts.iteration import plain_copy
from loadlint.rules.base import CallChange, Context, FixSpec, Invalid, Report, Rule, Valid
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

    VALID = [
        Valid("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=2, pin_memory=True)
            for x, y in loader:
                x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        """),
        # Not pinned: LL202's business.
        Valid("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=2)
            for x in loader:
                x = x.cuda()
        """),
        # Not a CUDA destination.
        Valid("""
            import torch
            from torch.utils.data import DataLoader
            device = torch.device("mps")
            loader = DataLoader(ds, num_workers=2, pin_memory=True)
            for x in loader:
                x = x.to(device)
        """),
        # An unknown device stays silent.
        Valid("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=2, pin_memory=True)
            for x in loader:
                x = x.to(args.device)
        """),
        # A CPU tensor type is not a copy to the GPU.
        Valid("""
            import torch
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=2, pin_memory=True)
            for x, y in loader:
                x = x.type(torch.FloatTensor)
                y = y.type(torch.cuda.LongTensor, non_blocking=True)
        """),
        # Not a batch of the loader.
        Valid("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=2, pin_memory=True)
            model.cuda()
            for x in loader:
                model(x)
        """),
    ]
    INVALID = [
        # A CUDA tensor type: the same blocking copy as `.cuda()`.
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=2, pin_memory=True)
            for images, labels in loader:
                images = images.type(torch.cuda.FloatTensor)
                labels = labels.type(dtype="torch.cuda.LongTensor")
            """,
            message="`.type()` of a pinned batch without `non_blocking=True`: the copy blocks and cannot overlap "
            "compute, so pinning buys nothing; pass `non_blocking=True`",
            count=2,
            fixed="""
            import torch
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=2, pin_memory=True)
            for images, labels in loader:
                images = images.type(torch.cuda.FloatTensor, non_blocking=True)
                labels = labels.type(dtype="torch.cuda.LongTensor", non_blocking=True)
            """,
            line=5,
        ),
        # A loader read from a dict by its key.
        Invalid(
            """
            from torch.utils.data import DataLoader
            loaders = {"train": DataLoader(ds, num_workers=2, pin_memory=True)}
            for x, y in loaders["train"]:
                x = x.cuda()
            """,
            fixed="""
            from torch.utils.data import DataLoader
            loaders = {"train": DataLoader(ds, num_workers=2, pin_memory=True)}
            for x, y in loaders["train"]:
                x = x.cuda(non_blocking=True)
            """,
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=2, pin_memory=True)
            for x, y in loader:
                x = x.cuda()
            """,
            message="`.cuda()` of a pinned batch without `non_blocking=True`: the copy blocks and cannot overlap "
            "compute, so pinning buys nothing; pass `non_blocking=True`",
            fixed="""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=2, pin_memory=True)
            for x, y in loader:
                x = x.cuda(non_blocking=True)
            """,
            line=4,
        ),
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            def train(ds):
                loader = DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True)
                for epoch in range(3):
                    for i, (images, labels) in enumerate(loader):
                        images = images.to(device)
                        labels = labels.to(device, non_blocking=True)
            """,
            fixed="""
            import torch
            from torch.utils.data import DataLoader
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            def train(ds):
                loader = DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True)
                for epoch in range(3):
                    for i, (images, labels) in enumerate(loader):
                        images = images.to(device, non_blocking=True)
                        labels = labels.to(device, non_blocking=True)
            """,
            line=8,
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=2, pin_memory=True)
            for batch in loader:
                inputs = batch["x"].to("cuda:0")
                targets = batch["y"].cuda(0)
            """,
            count=2,
            fixed="""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=2, pin_memory=True)
            for batch in loader:
                inputs = batch["x"].to("cuda:0", non_blocking=True)
                targets = batch["y"].cuda(0, non_blocking=True)
            """,
        ),
    ]
