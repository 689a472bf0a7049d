from __future__ import annotations

from typing import Iterator

import libcst as cst

from loadlint.cst.codegen import code_for_node
from loadlint.hardware.detect import suggest_num_workers
from loadlint.rules.base import Context, FixSpec, Report, Rule
from loadlint.rules.shared import (
    alive_share, declared_cpus, measured_defers, origin_note, oversubscribed, profile_note,
    ranks, set_workers_fix, suggested_workers, too_many_together, trainer_workers, use_workers, workers_code,
)


def _on_cpus(usable: int) -> str:
    return f"on {usable} usable CPU{'s' * (usable != 1)}"


def _training_arguments(ctx: Context) -> Iterator[Report]:
    """``TrainingArguments(dataloader_num_workers=N)`` with more workers per node than usable CPUs."""
    usable = declared_cpus(ctx)
    if usable is None:
        return  # a count is too high only against the CPUs of a declared target
    for call in ctx.cli.training_arguments:
        value = call.value("dataloader_num_workers")
        per_node = ranks(ctx)
        if type(value) is not int or value * per_node <= usable:
            continue
        n = trainer_workers(ctx, call)
        found = call.origin("dataloader_num_workers")
        message = (
            f"{oversubscribed('dataloader_num_workers', value, found, per_node)} {_on_cpus(usable)}: the Trainer's workers compete for cores and "
            f"memory; {use_workers(ctx, 'dataloader_num_workers', n)}"
        )
        yield Report(call.node, message, set_workers_fix(ctx, call.node, "dataloader_num_workers", n, found))


def _alive_together(ctx: Context) -> Iterator[Report]:
    """Loaders alive at the same time whose workers add up past the usable
    CPUs, where none does alone (that one is reported by itself)."""
    per_node, usable = ranks(ctx), declared_cpus(ctx)
    if usable is None:
        return
    for group in ctx.alive_together():
        counts = too_many_together(ctx, group)
        if counts is None:
            continue
        total = sum(counts) * per_node
        if any(measured_defers(ctx, call)[0] for call in group.calls):
            continue
        named = [f"`{name}`" for name in group.names]
        loaders = ", ".join(named[:-1]) + f" and {named[-1]}"
        why = "iterated together by `zip`" if group.kind == "zip" else "persistent workers, kept while each loader lives"
        terms = " + ".join(f"{n}{origin_note(call.origin('num_workers'))}" for n, call in zip(counts, group.calls))
        started = f"({terms}) × {per_node} ranks" if per_node > 1 else terms
        n = suggest_num_workers(ctx.profile, per_node, None)
        message = (
            f"{loaders} are alive at the same time ({why}): {started} = {total} workers {_on_cpus(usable)}: "
            f"workers compete for cores and memory; lower their `num_workers` to add up to {n} at most ({profile_note(ctx)})"
        )
        # No fix: how the CPUs are shared among the loaders is the author's choice.
        yield Report(group.calls[-1].node, message)


class WorkerOversubscription(Rule):
    """
    ## What it does
    Checks for DataLoaders that start more worker processes on a node than
    the node has usable CPUs: `num_workers × ranks per node > usable CPUs`,
    where the usable CPUs are the declared target's `cpus` and the ranks per
    node its GPU count when the module trains distributed, else 1.  Without
    a declared `cpus` a count is not judged (16 workers are too many on 4
    CPUs and fine on 64), except what is too many on any machine:
    `num_workers=os.cpu_count()` (or `multiprocessing.cpu_count()`,
    `psutil.cpu_count()`) in a distributed module is always reported.

    The known DataLoader subclasses (MONAI's `DataLoader`, PyG's
    `DataLoader` and `DenseDataLoader`: README, Rules) are checked like
    torch's own: they forward these keywords to it.

    ## Why is this bad?
    Each worker is a full Python process.  Past the number of CPUs, workers
    only compete for cores with each other and with the training processes;
    throughput drops, memory grows with every copy of the parent, and nodes
    freeze or get OOM-killed.  `os.cpu_count()` counts every CPU of the host,
    ignoring CPU affinity and container quotas, and under DDP every rank
    starts that many workers: 8 ranks × 96 workers on a 96-CPU node.
    PyTorch only warns about one loader in one process
    (`check_worker_number_rationality`); it never adds up the ranks.

    The ranks per node are Lightning's `Trainer(devices=N)` when the module
    sets them.  `TrainingArguments(dataloader_num_workers=N)` is checked the
    same way, and a command-line default counts (the message names it; the
    fix changes the default, so the option still overrides it).

    Config objects count the same way: the default of a yacs `CfgNode`
    tree (`_C.DATA.NUM_WORKERS = 8`, read as `cfg.DATA.NUM_WORKERS` through
    `_C.clone()`, a `get_cfg_defaults()` returning it, a parameter every
    call passes it to, or `from config import cfg` in another module), of a
    dataclass field (`num_workers: int = 8`, read through `DataConfig()`, a
    nested `field(default_factory=...)`, or a parameter annotated with the
    class where the module makes it with its defaults), of `OmegaConf.create({...})`, and of a YAML file beside the
    code: Hydra's primary config (`@hydra.main(config_path="conf",
    config_name="config")`, read through the function's parameter and a
    local function every call passes it to) or
    `OmegaConf.load("config.yaml")` (the file beside the script or at the
    project root).  A config file merged in (`merge_from_file`), a
    command-line list or a Hydra override (`data.num_workers=4`) may
    override it, as an option overrides its default: the message names the
    default and where it is, and the fix changes it in the code (a value
    from a YAML file or another module is reported without a fix).

    Limits, where the value stays unknown: an attribute assigned again
    (`cfg.DATA.NUM_WORKERS = args.workers`, `__post_init__`; for a tree or
    file another module reads, in any module of the project) or named in a
    string (`merge_from_list(["DATA.NUM_WORKERS", "2"])`,
    `OmegaConf.update(cfg, "data.num_workers", 2)`); a module that calls
    `setattr`; a tree built from a dict or under a condition; for a
    parameter annotated with a dataclass, a class the module constructs
    with arguments, or never constructs with its defaults; a tree
    another module returns from a function (`cfg = get_cfg_defaults()` with
    the function imported); a config passed on to another module's
    functions; a Hydra config whose `defaults` list does not end with
    `_self_` (the groups it composes may override its values) and values of
    those groups; YAML outside the plain `key: value` subset (lists,
    anchors, tags, interpolations such as `${...}`); and a config file
    outside the project.  YAML is read by a small safe reader, never by a
    loader that can construct objects.

    Loaders alive at the same time add up: those iterated together by
    `zip`, and loaders with `persistent_workers=True` bound once in the same
    function (or at module level), built outside any loop and each started
    there (a `for` over it, or a call handing it to a local function that
    loops over it), in a statement that always runs: once started, a
    persistent loader keeps its workers while it lives.  The message names
    them; there is no fix, as how to share the CPUs among them is the
    author's choice.  The fixes that set a count (this rule's for one
    loader over the CPUs, LL201's) give each loader of such a group an
    equal part of the suggestion instead (docs/hardware.md), so they leave
    no such total behind.  Limits: loaders kept on `self`, built by a helper,
    rebuilt in a loop, or started only under a condition are not added up;
    nor are loaders whose workers end before the next one's start
    (`persistent_workers=False`, `itertools.chain`).

    "Usable CPUs" is `cpus` of the declared target; `--target detect`
    declares this machine's (the smallest of its logical CPUs, this
    process's affinity and the cgroup CPU quota).

    A call that `loadlint fix --from-verify` rewrote carries a mark such as
    `# loadlint: measured 8.65x on 2 CPUs, 2026-12-04`: measured beats
    guessed, so the rule stays silent while the target has the measured
    machine's CPUs (and GPUs), and on other hardware it says the
    measurement was made elsewhere.

    ## Example
    ```python
    dist.init_process_group("nccl")
    loader = DataLoader(ds, sampler=sampler, num_workers=os.cpu_count())
    ```

    Use instead:
    ```python
    LOADER_CPUS = getattr(os, "process_cpu_count", os.cpu_count)() or 1
    LOADER_WORKERS = max(1, LOADER_CPUS // int(os.environ.get("LOCAL_WORLD_SIZE", 1))
                            - (1 if LOADER_CPUS > 2 else 0))
    dist.init_process_group("nccl")
    loader = DataLoader(ds, sampler=sampler, num_workers=LOADER_WORKERS)
    ```

    ## Fix safety
    With `cpus` declared in the target, the fix replaces a literal with the
    target's suggestion.  Without one it writes nothing this machine
    decides: `os.cpu_count()` in a distributed module becomes
    `LOADER_WORKERS`, a constant defined after the imports that applies the
    worker formula (docs/hardware.md) to the CPUs the process may use,
    divided among the node's ranks, at run time (adding `import os` when
    needed).  It is safe: it only lowers the number of workers.

    ## References
    - [torch.utils.data: `check_worker_number_rationality`](https://github.com/pytorch/pytorch/blob/main/torch/utils/data/dataloader.py)
    - [torchrun environment variables (`LOCAL_WORLD_SIZE`)](https://pytorch.org/docs/stable/elastic/run.html#environment-variables)
    """

    code = "LL203"
    name = "worker-oversubscription"
    category = "performance"
    summary = "more DataLoader workers on a node than it has usable CPUs"
    fix_availability = "sometimes"
    needs_hardware = True

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.all_calls:
            expr = call.expr("num_workers")
            if expr is not None and ctx.distributed:
                target, _ = ctx.follow(expr, call.scope)
                if type(target) is cst.Call and id(target) in ctx.loaders.cpu_count_calls:
                    name = code_for_node(target.func)
                    message = (
                        f"`num_workers={name}()` under distributed training: every rank on the node starts "
                        "a worker per CPU of the whole machine; divide the usable CPUs among the ranks"
                    )
                    code, needs, defined = workers_code(ctx, 0, run_time=True)
                    fix = FixSpec("safe", f"Replace `{name}()` with `{code}`{defined}", replace=[(target, code)], imports=needs)
                    yield Report(call.node, message, fix)
                    continue
            value = call.value("num_workers")
            usable = declared_cpus(ctx)
            if type(value) is not int or value <= 0 or usable is None:
                continue
            per_node = ranks(ctx)
            total = value * per_node
            if total <= usable:
                continue
            defers, elsewhere = measured_defers(ctx, call)
            if defers:
                continue  # measured faster on this hardware: not a guess to correct
            share, shared = alive_share(ctx, call)
            n = suggested_workers(ctx, call, share)
            found = call.origin("num_workers")
            message = (
                f"{oversubscribed('num_workers', value, found, per_node)} {_on_cpus(usable)}: workers compete for cores and memory; "
                f"{use_workers(ctx, 'num_workers', n)}{shared}{elsewhere}"
            )
            yield Report(call.node, message, set_workers_fix(ctx, call.node, "num_workers", n, found, share))
        yield from _training_arguments(ctx)
        yield from _alive_together(ctx)
