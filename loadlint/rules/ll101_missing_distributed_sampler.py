from __future__ import annotations

from typing import Iterator

import libcst as cst

from loadlint.cst.codegen import code_for_node
from loadlint.facts.distributed import rank_zero_only, sampler_tail, single_process
from loadlint.facts.loaders import LoaderCall
from loadlint.facts.values import MISSING
from loadlint.rules.base import CallChange, Context, FixSpec, Report, Rule

_IMPORT = "from torch.utils.data.distributed import DistributedSampler"
_SAMPLER_NAMES = ("torch.utils.data.DistributedSampler",)


class MissingDistributedSampler(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls over a map-style dataset without a `sampler`
    or `batch_sampler` in a module that sets up distributed training
    (`init_process_group`, `DistributedDataParallel`, `mp.spawn`,
    `get_rank`/`get_world_size`, the torchrun variables `LOCAL_RANK` and
    `WORLD_SIZE`).  A rank variable read from the environment is no evidence
    in a module that trains with JAX (it imports `jax`, `flax` or `optax`)
    and shows nothing else: Flax training scripts read `LOCAL_RANK` as
    boilerplate, and JAX runs one process per host.  Nor is it in a test
    module (it imports `pytest`): test fixtures read `RANK` to keep each
    rank's files apart, and their loaders are test inputs.

    ## Why is this bad?
    Without a `DistributedSampler`, every rank iterates the whole dataset:
    with 8 GPUs each sample is seen 8 times per epoch, the epoch takes as long
    as on one GPU, and gradients are averaged over duplicates.  Nothing
    crashes; the run is just 8 times more expensive than it should be.

    The rule is silent when a framework owns sampling (Lightning's `Trainer`
    and modules, accelerate's `Accelerator`, the Hugging Face `Trainer`, Ray
    Train's `prepare_data_loader`), when a sampler is passed, also
    conditionally (`sampler=DistributedSampler(ds) if distributed else None`),
    and when the dataset is an `IterableDataset`.  No rank repeats another's
    work, and the rule is silent too, when:

    - every use of the loader in the function that builds it is inside an
      `if` that holds in one process: `if args.rank == 0:`,
      `if dist.get_rank() == 0:`, `if not args.distributed or rank == 0:`,
      `if is_main_process():` (or `args.rank % ngpus_per_node == 0`, the
      first process of each node: one per node, not one per GPU);
    - the loader reads the samples a `DistributedSampler(..., drop_last=True)`
      left out, `Subset(ds, range(len(sampler) * world_size, len(ds)))`:
      an evaluation that scores that tail apart on every rank (as
      pytorch/examples' ImageNet script does) means it;
    - an `assert` before the loader, in its block or one around it, says
      the run has one process (`assert not multi_gpu`,
      `assert not args.distributed`, `assert world_size == 1`: wav2vec2's
      transcription branch);
    - the dataset is already this rank's part of an index tensor
      (`idx = idx.split(n)[rank]`, `idx[rank::world_size]`: PyG's
      multi-GPU examples).

    Still reported, by design: an evaluation loader every rank reads in
    full at the end of training (DeepSpeed's CIFAR-10 example scores the
    test set on each rank).  The work is repeated, not the training; pass
    a `DistributedSampler` and all-reduce the metrics, or evaluate on
    rank 0 alone, or add a `noqa` where the repeat is cheap.

    ## Example
    ```python
    dist.init_process_group("nccl")
    loader = DataLoader(train_set, batch_size=32, shuffle=True)
    for epoch in range(epochs):
        for batch in loader:
            ...
    ```

    Use instead:
    ```python
    from torch.utils.data.distributed import DistributedSampler

    dist.init_process_group("nccl")
    loader = DataLoader(train_set, batch_size=32, sampler=DistributedSampler(train_set, shuffle=True))
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)
        for batch in loader:
            ...
    ```

    ## Fix safety
    The fix passes `sampler=DistributedSampler(<dataset>, shuffle=<the old
    shuffle value, default False>)`, removes `shuffle`, adds the import, and,
    where the loader is iterated in an epoch loop with a loop variable,
    inserts `<loader>.sampler.set_epoch(<epoch>)` as the loop body's first
    statement.  It is unsafe: it changes which samples each rank sees (which
    is the point, but the user must read it).  No fix is offered when the
    dataset argument is not a plain name (it would be built twice): the
    finding says so, and how to write it.  The fix
    is withheld, and the finding says why, when the function that builds
    the loader starts distributed training only under a condition
    (`if args.distributed: model = DDP(model)`): an unconditional
    `DistributedSampler` would fail in the runs without a process group.

    ## References
    - [`DistributedSampler`](https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler)
    - [Multi-GPU training with DDP](https://pytorch.org/tutorials/beginner/ddp_series_multigpu.html)
    """

    code = "LL101"
    name = "missing-distributed-sampler"
    category = "data-bug"
    summary = "distributed training without a `DistributedSampler`: every rank sees every sample"
    fix_availability = "sometimes"

    def check(self, ctx: Context) -> Iterator[Report]:
        if not ctx.distributed or ctx.launch.frameworks:
            return
        for call in ctx.calls:
            if call.value("sampler") is not MISSING or call.value("batch_sampler") is not MISSING:
                continue
            if ctx.is_iterable_dataset(call):
                continue
            if ctx.lightning_hook(call):
                continue
            # One process reads it, or every rank reads the tail its sampler dropped on purpose.
            if rank_zero_only(ctx.names, ctx.statements, call) is not None or sampler_tail(ctx.names, call):
                continue
            # The run has one process there, or the dataset is already this rank's part.
            if single_process(ctx.names, ctx.statements, call) is not None:
                continue
            # A call that starts distributed training reads better than an
            # environment lookup (the run-time worker count reads LOCAL_WORLD_SIZE).
            evidence = next((e for e in ctx.launch.evidence if not e.startswith("os.")), ctx.launch.evidence[0])
            message = (
                f"every rank iterates the whole dataset: the module trains distributed (`{evidence}`) "
                "but this DataLoader has no `sampler`; pass `sampler=DistributedSampler(dataset)`"
            )
            yield Report(call.node, message, self._fix(ctx, call))

    def _fix(self, ctx: Context, call: LoaderCall) -> FixSpec:
        dataset = call.expr("dataset")
        if dataset is None or ctx.dotted(dataset) is None or "dataset" not in call.args:
            if dataset is not None and "dataset" in call.args:
                why = (
                    "the dataset is built in the call, and the sampler needs the same object; bind it to a name "
                    "(`val_dataset = ...`) and pass `sampler=DistributedSampler(val_dataset, shuffle=False)`"
                )
            else:
                why = (
                    "the dataset comes through `**` arguments; add `sampler=DistributedSampler(<the dataset>, "
                    "shuffle=False)` where they are made"
                )
            return FixSpec("unsafe", "Pass a `DistributedSampler`", withheld=(
                f"no fix: {why}; for an evaluation, all-reduce the metrics, or evaluate on rank 0 alone"
            ))
        shuffle = call.expr("shuffle")
        shuffle_code = "False" if shuffle is None else code_for_node(shuffle)
        sampler = f"DistributedSampler({ctx.dotted(dataset)}, shuffle={shuffle_code})"
        spec = FixSpec(
            "unsafe",
            "Pass a `DistributedSampler` (changes which samples each rank sees)",
            calls=[CallChange(call.node, {"sampler": sampler}, ("shuffle",))],
            imports=[] if self._has_import(ctx) else [_IMPORT],
        )
        start = ctx.conditional_start(call)
        condition = code_for_node(start) if start is not None else None
        if condition is not None:
            spec.withheld = (
                f"no fix: this function trains distributed only `if {condition}:`, and a `DistributedSampler` fails "
                "without a process group (\"Default process group has not been initialized\"); pass one under the "
                f"same condition, e.g. `sampler=DistributedSampler(dataset) if {condition} else None`"
            )
        if not ctx.loops.set_epoch_called:
            for frame, iteration in ctx.epoch_uses(call):
                if iteration is None or frame.var is None or iteration.scope.function is not call.scope.function:
                    continue
                spec.prepend.append((frame.node, f"{iteration.key[1]}.sampler.set_epoch({frame.var})"))
                break
        return spec

    @staticmethod
    def _has_import(ctx: Context) -> bool:
        qualified = ctx.names.imports.names.get("DistributedSampler")
        return qualified in ("torch.utils.data.distributed.DistributedSampler", "torch.utils.data.DistributedSampler")
