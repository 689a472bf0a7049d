from __future__ import annotations

from typing import Iterator

from loadlint.rules.base import CallChange, Context, FixSpec, Report, Rule
from loadlint.rules.shared import is_truthy, value_text, written_in_call


class PinMemoryWithoutAccelerator(Rule):
    """
    ## What it does
    Checks for `pin_memory=True` where no accelerator will use it: the code
    only uses the CPU (an explicit `cpu` device and no sign of CUDA), or the
    target declares `gpus=0`.

    The known DataLoader subclasses (MONAI's `DataLoader`, PyG's
    `DataLoader` and `DenseDataLoader`: README, Rules) are checked like
    torch's own: they forward these keywords to it.

    ## Why is this bad?
    Page-locked memory only speeds up copies to an accelerator.  Without one,
    torch ignores the option with a warning on every loader:

    ```
    UserWarning: 'pin_memory' argument is set as true but no accelerator is found, then device pinned memory won't be used.
    ```

    When it does pin (an accelerator present but unused), it spends a pin
    thread and locked host memory on copies that never happen.

    The rule is silent when the module shows accelerator evidence and the
    target does not declare `gpus=0`, and when the value cannot be resolved.

    ## Example
    ```python
    device = torch.device("cpu")
    loader = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True)
    ```

    Use instead:
    ```python
    device = torch.device("cpu")
    loader = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=torch.cuda.is_available())
    ```

    ## Fix safety
    The fix sets `pin_memory=torch.cuda.is_available()` (adding `import
    torch` when needed).  It is safe: on a machine with CUDA nothing changes,
    elsewhere the warning and the pin thread go away.

    ## References
    - [PyTorch: Memory pinning](https://pytorch.org/docs/stable/data.html#memory-pinning)
    """

    code = "LL208"
    name = "pin-memory-without-accelerator"
    category = "performance"
    summary = "`pin_memory=True` where no accelerator uses it"
    fix_availability = "sometimes"
    needs_hardware = True

    def check(self, ctx: Context) -> Iterator[Report]:
        profile = ctx.profile
        accelerator = ctx.accelerator
        declared_none = "gpus" in profile.declared and profile.gpu_count == 0
        cpu_only = accelerator.cpu_device and not accelerator.cuda and not accelerator.xla
        if not declared_none and not cpu_only:
            return
        reason = "the code only uses the CPU" if cpu_only else f"the target has no GPU ({profile.label})"
        for call in ctx.all_calls:
            if is_truthy(call.value("pin_memory")) is not True:
                continue
            message = (
                f"{value_text(call, 'pin_memory')} but {reason}: torch warns and pins nothing; "
                "use `pin_memory=torch.cuda.is_available()`"
            )
            fix = None
            if written_in_call(call, "pin_memory"):
                imports = [] if ctx.names.imports.names.get("torch") == "torch" else ["import torch"]
                fix = FixSpec(
                    "safe",
                    "Pin only when CUDA is available",
                    calls=[CallChange(call.node, {"pin_memory": "torch.cuda.is_available()"})],
                    imports=imports,
                )
            yield Report(call.node, message, fix)
