from __future__ import annotations

from typing import Iterator

from loadlint.facts.values import MISSING
from loadlint.rules.base import Context, Invalid, Report, Rule, Valid
from loadlint.rules.shared import dataset_touches_cuda, origin_note, set_argument_fix


def _training_arguments(ctx: Context) -> Iterator[Report]:
    """``TrainingArguments(dataloader_pin_memory=False)`` in a module that uses the GPU."""
    for call in ctx.values.training_arguments:
        if call.value("dataloader_pin_memory") is not False or call.value("use_cpu") is True:
            continue
        found = call.origin("dataloader_pin_memory")
        message = (
            f"`dataloader_pin_memory=False`{origin_note(found)} but the Trainer moves batches to the GPU: copies "
            "from pageable memory block and cannot overlap compute; set `dataloader_pin_memory=True`"
        )
        fix = set_argument_fix(call.node, "dataloader_pin_memory", "True", found, "Set `dataloader_pin_memory=True`")
        yield Report(call.node, message, fix)


class MissingPinMemory(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls without `pin_memory=True` in code that moves
    its batches to a GPU (`.cuda()`, `.to("cuda")`, `.to(device)` where
    `device` is a CUDA device or `torch.accelerator.current_accelerator()`,
    the `nccl` backend).

    ## Why is this bad?
    A host-to-device copy from ordinary (pageable) memory is staged through a
    pinned buffer by the driver and blocks the host; it cannot overlap with
    compute.  With `pin_memory=True` the DataLoader's pin thread places each
    batch in page-locked memory in the background, and
    `.to(device, non_blocking=True)` copies it asynchronously.

    The rule is silent when the module shows no sign of an accelerator (a
    CPU-only script is not told to pin memory), and when the Dataset itself
    returns CUDA tensors (pinning those fails; see LL105).  Signs include a
    `--device` option that defaults to `"cuda"`, `DistributedDataParallel`
    with `device_ids`, accelerate's `accelerator.device` and Lightning's
    `Trainer(accelerator="gpu")`.  `TrainingArguments(dataloader_pin_memory=False)`
    in such a module is reported as well (the Trainer pins by default).

    Project analysis follows a loader built in a module with no such sign
    into the functions it is passed or returned to: `.cuda()` of its batches
    there, or `.to(device)` where the device resolves (through the callers'
    arguments, a `--device` default) to CUDA, is reported on the
    `DataLoader(` line with the chain of calls.  A device left unknown
    counts only where that module shows CUDA itself; a CPU device never.

    Lightning across modules: a `LightningDataModule` (or a
    `LightningModule` with `*_dataloader` hooks) whose module shows no GPU is
    reported on the `DataLoader(` lines its hooks return when another project
    module builds `Trainer(accelerator="gpu")` (or `"cuda"`), bound once to a
    name, and hands that Trainer an instance of the class, made by it or by
    up to 3 module-level functions returning one (`dm = DigitsData()` or
    `dm = make_data()`, then `trainer.fit(model, datamodule=dm)`).  Only the
    hooks the call runs count: `fit` the train and validation loaders,
    `validate`, `test` and `predict` their own.  An accelerator left to
    `"auto"`, the command line or a condition, a Trainer or instance bound
    more than once, a call inside a test function, a subclass defined in the
    script, and a loader passed as `train_dataloaders=` are not followed:
    silent.

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=64, num_workers=4)
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
    ```

    Use instead:
    ```python
    loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
    ```

    ## Fix safety
    The fix sets `pin_memory=True`.  It is safe: on a machine without an
    accelerator PyTorch only warns and skips pinning.

    ## References
    - [PyTorch: Memory pinning](https://pytorch.org/docs/stable/data.html#memory-pinning)
    - [A guide on good usage of non_blocking and pin_memory()](https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html)
    """

    code = "LL202"
    name = "missing-pin-memory"
    category = "performance"
    across_files = True
    summary = "batches go to the GPU from pageable memory (`pin_memory` not set)"
    fix_availability = "always"

    def check(self, ctx: Context) -> Iterator[Report]:
        if not ctx.accelerator.cuda:
            return
        for call in ctx.calls:
            value = call.value("pin_memory")
            if value is not MISSING and value is not False:
                continue
            if dataset_touches_cuda(ctx, call):
                continue
            found = call.origin("pin_memory")
            what = "`pin_memory` is not set" if value is MISSING else "`pin_memory=False`" + origin_note(found)
            message = (
                f"{what} but batches go to the GPU: copies from pageable memory block and cannot overlap compute; "
                "set `pin_memory=True`"
            )
            fix = set_argument_fix(call.node, "pin_memory", "True", found, "Set `pin_memory=True`")
            yield Report(call.node, message, fix)
        yield from _training_arguments(ctx)


    VALID = [
        # No accelerator in sight.
        Valid("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=2)
            for x in loader:
                print(x.sum())
        """),
        Valid("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=2, pin_memory=True)
            for x in loader:
                x = x.cuda(non_blocking=True)
        """),
        Valid("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=2, pin_memory=args.pin)
            model.cuda()
        """),
        # The dataset already returns CUDA tensors.
        Valid("""
            import torch
            from torch.utils.data import DataLoader, Dataset
            class OnGpu(Dataset):
                def __getitem__(self, i):
                    return torch.ones(3).cuda()
                def __len__(self):
                    return 10
            loader = DataLoader(OnGpu(), num_workers=0)
            model.cuda()
        """),
        # A device that is explicitly the CPU.
        Valid("""
            import torch
            from torch.utils.data import DataLoader
            device = torch.device("cpu")
            loader = DataLoader(ds, num_workers=2)
            for x in loader:
                x = x.to(device)
        """),
            # No accelerator in sight for the Trainer's loader.
        Valid("""
            from transformers import TrainingArguments
            args = TrainingArguments(output_dir="out", dataloader_pin_memory=False)
        """),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            loader = DataLoader(ds, num_workers=2)
            for x in loader:
                x = x.to(device)
            """,
            message="`pin_memory` is not set but batches go to the GPU: copies from pageable memory block and cannot "
            "overlap compute; set `pin_memory=True`",
            fixed="""
            import torch
            from torch.utils.data import DataLoader
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            loader = DataLoader(ds, num_workers=2, pin_memory=True)
            for x in loader:
                x = x.to(device)
            """,
            line=4,
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=2, pin_memory=False)
            for x, y in loader:
                x, y = x.cuda(), y.cuda()
            """,
            fixed="""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=2, pin_memory=True)
            for x, y in loader:
                x, y = x.cuda(), y.cuda()
            """,
        ),
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader
            device = torch.accelerator.current_accelerator()
            loader = DataLoader(ds, num_workers=2)
            model.to(device)
            """,
            fixed="""
            import torch
            from torch.utils.data import DataLoader
            device = torch.accelerator.current_accelerator()
            loader = DataLoader(ds, num_workers=2, pin_memory=True)
            model.to(device)
            """,
        ),
        Invalid(
            """
            import torch.distributed as dist
            from torch.utils.data import DataLoader
            dist.init_process_group(backend="nccl")
            loader = DataLoader(ds, num_workers=2, sampler=s)
            """,
            fixed="""
            import torch.distributed as dist
            from torch.utils.data import DataLoader
            dist.init_process_group(backend="nccl")
            loader = DataLoader(ds, num_workers=2, sampler=s, pin_memory=True)
            """,
        ),
        Invalid(
            """
            import argparse
            import torch
            from torch.utils.data import DataLoader
            parser = argparse.ArgumentParser()
            parser.add_argument("--device", default="cuda")
            args = parser.parse_args()
            loader = DataLoader(ds, num_workers=2)
            for x in loader:
                x = x.to(torch.device(args.device))
            """,
            fixed="""
            import argparse
            import torch
            from torch.utils.data import DataLoader
            parser = argparse.ArgumentParser()
            parser.add_argument("--device", default="cuda")
            args = parser.parse_args()
            loader = DataLoader(ds, num_workers=2, pin_memory=True)
            for x in loader:
                x = x.to(torch.device(args.device))
            """,
        ),
        Invalid(
            """
            from transformers import TrainingArguments
            args = TrainingArguments(output_dir="out", dataloader_num_workers=4, dataloader_pin_memory=False)
            model.cuda()
            """,
            message="`dataloader_pin_memory=False` but the Trainer moves batches to the GPU: copies from pageable "
            "memory block and cannot overlap compute; set `dataloader_pin_memory=True`",
            fixed="""
            from transformers import TrainingArguments
            args = TrainingArguments(output_dir="out", dataloader_num_workers=4, dataloader_pin_memory=True)
            model.cuda()
            """,
        ),
    ]
