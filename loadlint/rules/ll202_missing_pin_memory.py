from __future__ import annotations

from typing import Iterator

from loadlint.facts.batches import batches_on_gpu, batches_to_host, index_dataset, one_batch_read, string_dataset
from loadlint.facts.loaders import LoaderCall
from loadlint.facts.values import MISSING
from loadlint.rules.base import Context, Report, Rule
from loadlint.rules.project_context import LightningClass, LoaderFlow, ProjectContext, ProjectReport, Setting
from loadlint.rules.shared import dataset_touches_cuda, origin_note, set_argument_fix


def message(what: str, where: str = "") -> str:
    """The finding's text; ``what``: how the loader leaves pinning off,
    ``where``: how its batches reach the GPU, across files."""
    return (
        f"{what} but batches go to the GPU: copies from pageable memory block and cannot overlap compute; "
        "set `pin_memory=True`" + (f" ({where})" if where else "")
    )


def _unpinned(pinned: Setting) -> str | None:
    """How a loader's ``pin_memory`` leaves pinning off, as the message says it."""
    if not pinned.written:
        return "`pin_memory` is not set"
    return "`pin_memory=False`" if pinned.is_(False) else None


def _moved_elsewhere(project: ProjectContext, flow: LoaderFlow) -> Iterator[ProjectReport]:
    """A loader that is not pinned whose batches another module moves to the
    GPU (where it is built, no CUDA is in sight)."""
    what = _unpinned(flow.setting("pin_memory"))
    built = flow.built
    own = project.module(built.path)
    # The file's own LL202 sees its CUDA evidence; a module whose code
    # touches CUDA may hand the loader a Dataset that returns CUDA tensors.
    if what is None or own.cuda or own.cuda_code:
        return
    for use in flow.uses:
        if use.kind != "transfer" or use.method not in ("cuda", "to"):
            continue
        if use.method == "to":
            kind = use.device
            if kind is None and project.module(use.path).cuda:
                kind = "cuda"  # the module's CUDA evidence, as the file's LL202 reads a module
            if kind not in ("cuda", "accelerator"):
                continue
        # A value passed in is the caller's to choose.
        change = None if "pin_memory" in built.passed else (built.at, {"pin_memory": "True"}, "safe", "Set `pin_memory=True`")
        yield ProjectReport(built.path, built.at, message(what, f"batches moved to the GPU {use.by}"), change)
        return


def _handed_to_gpu_trainer(project: ProjectContext) -> Iterator[ProjectReport]:
    """The hook loaders of a Lightning class whose module shows no GPU, when
    another module hands an instance to a GPU Trainer."""

    def wanted(cls: LightningClass) -> bool:
        own = project.module(cls.path)
        # The file's own LL202 sees its GPU (or its Dataset may return CUDA tensors).
        return not (own.cuda or own.cuda_code) and any(_unpinned(loader.setting("pin_memory")) for loader in cls.loaders)

    for run in project.trainer_runs(wanted):
        via = f", made by `{run.maker}`," if run.maker is not None else ""
        for loader in run.loaders:
            what = _unpinned(loader.setting("pin_memory"))
            if what is None:
                continue
            where = (
                f"`{run.cls.name}`{via} is handed to `trainer.{run.method}` of a Lightning "
                f"`Trainer(accelerator=\"{run.accelerator}\")` at {project.place(run.path, run.at)}, which moves its "
                "batches to the GPU"
            )
            change = None if "pin_memory" in loader.passed else (loader.at, {"pin_memory": "True"}, "safe", "Set `pin_memory=True`")
            yield ProjectReport(loader.path, loader.at, message(what, where), change)


def _training_arguments(ctx: Context) -> Iterator[Report]:
    """``TrainingArguments(dataloader_pin_memory=False)`` in a module that uses the GPU."""
    for call in ctx.cli.training_arguments:
        if call.value("dataloader_pin_memory") is not False or call.value("use_cpu") is True:
            continue
        found = call.origin("dataloader_pin_memory")
        message = (
            f"`dataloader_pin_memory=False`{origin_note(found)} but the Trainer moves batches to the GPU: copies "
            "from pageable memory block and cannot overlap compute; set `dataloader_pin_memory=True`"
        )
        fix = set_argument_fix(call.node, "dataloader_pin_memory", "True", found, "Set `dataloader_pin_memory=True`")
        yield Report(call.node, message, fix)


def _unpinned_beside_pinned(ctx: Context, call: LoaderCall) -> bool:
    """``pin_memory=False`` written in the call while another loader of the
    module pins (or decides at run time): a choice made for this loader."""
    if "pin_memory" not in call.args or call.origin("pin_memory") is not None:
        return False
    return any(
        other is not call and "pin_memory" in other.args and other.value("pin_memory") is not False
        for other in ctx.all_calls
    )


class MissingPinMemory(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls without `pin_memory=True` in code that moves
    its batches to a GPU (`.cuda()`, `.to("cuda")`, `.to(device)` where
    `device` is a CUDA device or `torch.accelerator.current_accelerator()`,
    the `nccl` backend).

    The known DataLoader subclasses (MONAI's `DataLoader`, PyG's
    `DataLoader` and `DenseDataLoader`: README, Rules) are checked like
    torch's own: they forward these keywords to it.

    ## Why is this bad?
    A host-to-device copy from ordinary (pageable) memory is staged through a
    pinned buffer by the driver and blocks the host; it cannot overlap with
    compute.  With `pin_memory=True` the DataLoader's pin thread places each
    batch in page-locked memory in the background, and
    `.to(device, non_blocking=True)` copies it asynchronously.

    The rule is silent when the module shows no sign of an accelerator (a
    CPU-only script is not told to pin memory), and when the batches are
    already on the GPU, where `pin_memory=True` would raise: the Dataset
    returns CUDA tensors or holds them (see LL105), a `TensorDataset` of
    `.cuda()` tensors, a dataset built with a CUDA `device=` (MONAI
    transforms running on the GPU), a `collate_fn` that moves the batch
    (also one handed to a factory in a module whose collate functions use
    CUDA, as DLRM's).

    It is silent as well where pinning gains nothing:
    - batches that never reach the GPU: a loader only read one batch at a
      time (`first(loader)`, `next(iter(loader))`, also in a loop that times
      it), or only iterated by loops that send the batches back to the host
      (`x.to(torch.float16).cpu()`) and never to a device, or that use them
      where they are: no transfer in the loop, and the batches reach only
      builtins, functions of imported modules (`torch.max`), their own
      methods and a model of a class of the module that places nothing on a
      device (the CIFAR-10 tutorial's test loop, `net = Net()`, besides a
      look at one batch through `dataiter = iter(testloader)` and
      `next(dataiter)`);
    - batches of indices (`range(n)`, `torch.arange`, `mask.nonzero().view(-1)`,
      `torch.where(mask)[0]`): a few integers each, used to index tensors
      already on the GPU (`data.x[idx].to(device)` moves the gathered rows);
    - batches of strings (a list of strings as the dataset): pinning leaves
      strings as they are;
    - `pin_memory=False` written in the call while another loader of the
      module pins: a choice made for that loader (a validation loader).

    Still reported, by design: a `Dataset` class whose items are strings
    (the rule cannot see what `__getitem__` returns), a loader peeked
    at *and* passed on or iterated elsewhere, and batches of a class
    without a `pin_memory()` method (DETR's `NestedTensor`, built by its
    `collate_fn`): the pin thread leaves such an object as it is, so
    `pin_memory=True` pins only the plain tensors beside it; define
    `pin_memory()` on the class (returning it with its tensors pinned)
    for the images to be pinned too.  Signs include a
    `--device` option that defaults to `"cuda"`, a CUDA device passed as
    `device=` to a call (`main(device="cpu" if no_cuda else "cuda:0")`), `DistributedDataParallel`
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
    summary = "batches go to the GPU from pageable memory (`pin_memory` not set)"
    fix_availability = "always"

    def check(self, ctx: Context) -> Iterator[Report]:
        if not ctx.accelerator.cuda:
            return
        for call in ctx.all_calls:
            value = call.value("pin_memory")
            if value is not MISSING and value is not False:
                continue
            if dataset_touches_cuda(ctx, call) or batches_on_gpu(call, ctx.names, ctx.accelerator) is not None:
                continue
            if value is False and _unpinned_beside_pinned(ctx, call):
                continue
            if index_dataset(call, ctx.names) or string_dataset(call):
                continue
            keys = ctx.keys_of(call)
            if one_batch_read(call, ctx.names, ctx.iteration, keys, ctx.statements):
                continue
            if batches_to_host(call, ctx.names, ctx.iteration, keys, ctx.statements):
                continue
            found = call.origin("pin_memory")
            what = "`pin_memory` is not set" if value is MISSING else "`pin_memory=False`" + origin_note(found)
            fix = set_argument_fix(call.node, "pin_memory", "True", found, "Set `pin_memory=True`")
            yield Report(call.node, message(what), fix)
        yield from _training_arguments(ctx)

    def check_project(self, project: ProjectContext) -> Iterator[ProjectReport]:
        """Batches moved to the GPU in another module: followed from the
        loader through the calls, or by a Lightning Trainer."""
        for flow in project.loaders:
            yield from _moved_elsewhere(project, flow)
        yield from _handed_to_gpu_trainer(project)
