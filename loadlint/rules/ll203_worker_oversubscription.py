from __future__ import annotations

from typing import Iterator

import libcst as cst

from loadlint.cst.codegen import code_for_node
from loadlint.hardware.detect import suggest_num_workers
from loadlint.rules.base import Context, FixSpec, Invalid, Report, Rule, Valid
from loadlint.rules.shared import (
    RANK_WORKERS_CONSTANT, declared_cpus, measured_defers, origin_note, oversubscribed, profile_note,
    ranks, set_workers_fix, suggested_workers, too_many_together, trainer_workers, use_workers, workers_code,
)
from loadlint.types import HardwareProfile


_T8 = HardwareProfile(usable_cpus=16, gpu_count=8, declared=frozenset({"cpus", "gpus"}))
_T1 = HardwareProfile(usable_cpus=4, gpu_count=1, declared=frozenset({"cpus", "gpus"}))


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
    author's choice.  Limits: loaders kept on `self`, built by a helper,
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
            n = suggested_workers(ctx, call)
            found = call.origin("num_workers")
            message = (
                f"{oversubscribed('num_workers', value, found, per_node)} {_on_cpus(usable)}: workers compete for cores and memory; "
                f"{use_workers(ctx, 'num_workers', n)}{elsewhere}"
            )
            yield Report(call.node, message, set_workers_fix(ctx, call.node, "num_workers", n, found))
        yield from _training_arguments(ctx)
        yield from _alive_together(ctx)


    VALID = [
        Valid("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=3)
        """, profile=_T1),
        # Not distributed: os.cpu_count() cannot be resolved, and one process is fine.
        Valid("""
            import os
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=os.cpu_count())
        """),
        Valid("""
            import torch.distributed as dist
            from torch.utils.data import DataLoader
            dist.init_process_group("nccl")
            loader = DataLoader(ds, sampler=s, num_workers=1)
        """, profile=_T8),
        Valid("""
            from transformers import TrainingArguments
            args = TrainingArguments(output_dir="out", dataloader_num_workers=3)
        """, profile=_T1),
        # The parser's own default overrides the one its parent declares.
        Valid("""
            import argparse
            from torch.utils.data import DataLoader
            def common():
                parser = argparse.ArgumentParser(add_help=False)
                parser.add_argument("--workers", type=int, default=16)
                return parser
            parser = argparse.ArgumentParser(parents=[common()])
            parser.set_defaults(workers=2)
            args = parser.parse_args()
            loader = DataLoader(ds, batch_size=2, num_workers=args.workers)
        """, profile=_T1),
        # A config attribute set again after construction is not the default that runs.
        Valid("""
            from yacs.config import CfgNode as CN
            from torch.utils.data import DataLoader
            _C = CN()
            _C.DATA = CN()
            _C.DATA.NUM_WORKERS = 16
            def main(args):
                cfg = _C.clone()
                cfg.DATA.NUM_WORKERS = args.workers
                return DataLoader(ds, batch_size=2, num_workers=cfg.DATA.NUM_WORKERS)
        """, profile=_T1),
        Valid("""
            from dataclasses import dataclass
            from torch.utils.data import DataLoader
            @dataclass
            class DataConfig:
                num_workers: int = 16
            cfg = DataConfig(num_workers=2)
            loader = DataLoader(ds, batch_size=2, num_workers=cfg.num_workers)
        """, profile=_T1),
        # One after the other: each loader's workers stop when its epoch ends.
        Valid("""
            from torch.utils.data import DataLoader
            def main():
                train = DataLoader(a, batch_size=2, num_workers=3)
                val = DataLoader(b, batch_size=2, num_workers=3)
                for epoch in range(10):
                    for batch in train:
                        pass
                    for batch in val:
                        pass
        """, profile=_T1),
        # Persistent, but the test loader may never start: not certainly alive together.
        Valid("""
            from torch.utils.data import DataLoader
            def main(args):
                train = DataLoader(a, batch_size=2, num_workers=3, persistent_workers=True)
                test = DataLoader(b, batch_size=2, num_workers=3, persistent_workers=True)
                for batch in train:
                    pass
                if args.test:
                    for batch in test:
                        pass
        """, profile=_T1),
        # No CPU count declared: 16 workers are too many on 4 CPUs and fine on 64,
        # so this machine's 4 judge nothing.
        Valid("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=8, num_workers=16)
        """, profile=HardwareProfile(usable_cpus=1, here_cpus=4)),
    ]
    INVALID = [
        # Persistent loaders keep their workers while they live: 3 + 3 + 3 together.
        Invalid(
            """
            from torch.utils.data import DataLoader
            def run_epoch(loader):
                for batch in loader:
                    pass
            def main():
                train = DataLoader(a, batch_size=2, num_workers=3, persistent_workers=True)
                val = DataLoader(b, batch_size=2, num_workers=3, persistent_workers=True)
                test = DataLoader(c, batch_size=2, num_workers=3, persistent_workers=True)
                for epoch in range(10):
                    run_epoch(train)
                    run_epoch(val)
                run_epoch(test)
            """,
            message="`train`, `val` and `test` are alive at the same time (persistent workers, kept while each "
            "loader lives): 3 + 3 + 3 = 9 workers on 4 usable CPUs: workers compete for cores and memory; lower "
            "their `num_workers` to add up to 3 at most (target: 4 CPUs, 1 GPU)",
            profile=_T1,
            line=8,
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader
            labeled = DataLoader(a, batch_size=2, num_workers=3)
            unlabeled = DataLoader(b, batch_size=2, num_workers=3)
            for step, (x, u) in enumerate(zip(labeled, unlabeled)):
                pass
            """,
            message="`labeled` and `unlabeled` are alive at the same time (iterated together by `zip`): 3 + 3 = 6 "
            "workers on 4 usable CPUs: workers compete for cores and memory; lower their `num_workers` to add up "
            "to 3 at most (target: 4 CPUs, 1 GPU)",
            profile=_T1,
            line=3,
        ),
        # A yacs config tree's default, read through ``get_cfg_defaults()`` and a parameter.
        Invalid(
            """
            from yacs.config import CfgNode as CN
            from torch.utils.data import DataLoader
            _C = CN()
            _C.DATA = CN()
            _C.DATA.NUM_WORKERS = 16
            def get_cfg_defaults():
                return _C.clone()
            def build(cfg):
                return DataLoader(ds, batch_size=2, num_workers=cfg.DATA.NUM_WORKERS)
            if __name__ == "__main__":
                cfg = get_cfg_defaults()
                cfg.merge_from_file("experiment.yaml")
                loader = build(cfg)
            """,
            message="`num_workers=16` (with the default `_C.DATA.NUM_WORKERS = 16`) on 4 usable CPUs: workers "
            "compete for cores and memory; use `num_workers=2` (target: 4 CPUs, 1 GPU)",
            fixed="""
            from yacs.config import CfgNode as CN
            from torch.utils.data import DataLoader
            _C = CN()
            _C.DATA = CN()
            _C.DATA.NUM_WORKERS = 2
            def get_cfg_defaults():
                return _C.clone()
            def build(cfg):
                return DataLoader(ds, batch_size=2, num_workers=cfg.DATA.NUM_WORKERS)
            if __name__ == "__main__":
                cfg = get_cfg_defaults()
                cfg.merge_from_file("experiment.yaml")
                loader = build(cfg)
            """,
            profile=_T1,
            line=9,
        ),
        # A dataclass config: a nested field's default, and a parameter annotated with the class.
        Invalid(
            """
            from dataclasses import dataclass, field
            from torch.utils.data import DataLoader
            @dataclass
            class DataConfig:
                num_workers: int = 16
            @dataclass
            class Config:
                data: DataConfig = field(default_factory=DataConfig)
            def build(cfg: DataConfig):
                return DataLoader(ds, batch_size=2, num_workers=cfg.num_workers)
            def main():
                cfg = Config()
                return build(cfg.data)
            """,
            message="`num_workers=16` (with the default `DataConfig.num_workers = 16`) on 4 usable CPUs: workers "
            "compete for cores and memory; use `num_workers=2` (target: 4 CPUs, 1 GPU)",
            fixed="""
            from dataclasses import dataclass, field
            from torch.utils.data import DataLoader
            @dataclass
            class DataConfig:
                num_workers: int = 2
            @dataclass
            class Config:
                data: DataConfig = field(default_factory=DataConfig)
            def build(cfg: DataConfig):
                return DataLoader(ds, batch_size=2, num_workers=cfg.num_workers)
            def main():
                cfg = Config()
                return build(cfg.data)
            """,
            profile=_T1,
            line=10,
        ),
        # An option declared on a parent parser (``parents=``), as helpers return them.
        Invalid(
            """
            import argparse
            from torch.utils.data import DataLoader
            def common():
                parser = argparse.ArgumentParser(add_help=False)
                parser.add_argument("--workers", type=int, default=16)
                return parser
            parser = argparse.ArgumentParser(parents=[common()])
            parser.add_argument("--lr", type=float, default=0.1)
            args = parser.parse_args()
            loader = DataLoader(ds, batch_size=2, num_workers=args.workers)
            """,
            message="`num_workers=16` (with the default `--workers 16`) on 4 usable CPUs: workers compete for cores "
            "and memory; use `num_workers=2` (target: 4 CPUs, 1 GPU)",
            fixed="""
            import argparse
            from torch.utils.data import DataLoader
            def common():
                parser = argparse.ArgumentParser(add_help=False)
                parser.add_argument("--workers", type=int, default=2)
                return parser
            parser = argparse.ArgumentParser(parents=[common()])
            parser.add_argument("--lr", type=float, default=0.1)
            args = parser.parse_args()
            loader = DataLoader(ds, batch_size=2, num_workers=args.workers)
            """,
            profile=_T1,
            line=10,
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=2, num_workers=16)
            """,
            message="`num_workers=16` on 4 usable CPUs: workers compete for cores and memory; "
            "use `num_workers=2` (target: 4 CPUs, 1 GPU)",
            fixed="""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=2, num_workers=2)
            """,
            profile=_T1,
        ),
        Invalid(
            """
            import torch.distributed as dist
            from torch.utils.data import DataLoader
            dist.init_process_group("nccl")
            loader = DataLoader(ds, sampler=s, num_workers=4)
            """,
            message="`num_workers=4` × 8 ranks = 32 workers on 16 usable CPUs: workers compete for cores and "
            "memory; use `num_workers=1` (target: 16 CPUs, 8 GPUs, 8 ranks per node)",
            fixed="""
            import torch.distributed as dist
            from torch.utils.data import DataLoader
            dist.init_process_group("nccl")
            loader = DataLoader(ds, sampler=s, num_workers=1)
            """,
            profile=_T8,
        ),
        Invalid(
            """
            import os
            import torch.distributed as dist
            from torch.utils.data import DataLoader
            dist.init_process_group("nccl")
            loader = DataLoader(ds, sampler=s, num_workers=os.cpu_count())
            """,
            message="`num_workers=os.cpu_count()` under distributed training: every rank on the node starts a "
            "worker per CPU of the whole machine; divide the usable CPUs among the ranks",
            fixed="""
            import os
            import torch.distributed as dist
            from torch.utils.data import DataLoader
            %s
            dist.init_process_group("nccl")
            loader = DataLoader(ds, sampler=s, num_workers=LOADER_WORKERS)
            """ % "\n            ".join(RANK_WORKERS_CONSTANT),
        ),
        Invalid(
            """
            import multiprocessing
            from torch.utils.data import DataLoader
            from torch.nn.parallel import DistributedDataParallel
            workers = multiprocessing.cpu_count()
            def main():
                model = DistributedDataParallel(net)
                return DataLoader(ds, sampler=s, num_workers=workers)
            """,
            fixed="""
            import multiprocessing
            from torch.utils.data import DataLoader
            from torch.nn.parallel import DistributedDataParallel
            import os
            %s
            workers = LOADER_WORKERS
            def main():
                model = DistributedDataParallel(net)
                return DataLoader(ds, sampler=s, num_workers=workers)
            """ % "\n            ".join(RANK_WORKERS_CONSTANT),
        ),
        Invalid(
            """
            import argparse
            from torch.utils.data import DataLoader
            def main(args):
                return DataLoader(ds, batch_size=2, num_workers=args.workers)
            if __name__ == "__main__":
                parser = argparse.ArgumentParser()
                parser.add_argument("-j", "--workers", default=16, type=int)
                main(parser.parse_args())
            """,
            message="`num_workers=16` (with the default `--workers 16`) on 4 usable CPUs: workers compete for cores "
            "and memory; use `num_workers=2` (target: 4 CPUs, 1 GPU)",
            fixed="""
            import argparse
            from torch.utils.data import DataLoader
            def main(args):
                return DataLoader(ds, batch_size=2, num_workers=args.workers)
            if __name__ == "__main__":
                parser = argparse.ArgumentParser()
                parser.add_argument("-j", "--workers", default=2, type=int)
                main(parser.parse_args())
            """,
            profile=_T1,
        ),
        Invalid(
            """
            from transformers import TrainingArguments
            args = TrainingArguments(output_dir="out", dataloader_num_workers=16)
            """,
            message="`dataloader_num_workers=16` on 4 usable CPUs: the Trainer's workers compete for cores and "
            "memory; use `dataloader_num_workers=3` (target: 4 CPUs, 1 GPU)",
            fixed="""
            from transformers import TrainingArguments
            args = TrainingArguments(output_dir="out", dataloader_num_workers=3)
            """,
            profile=_T1,
        ),
        # One CPU, in the singular.
        Invalid(
            """
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=2)
            """,
            message="`num_workers=2` on 1 usable CPU: workers compete for cores and memory; use `num_workers=1` "
            "(target: 1 CPU, 0 GPUs)",
            fixed="""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=1)
            """,
            profile=HardwareProfile(usable_cpus=1, gpu_count=0, declared=frozenset({"cpus", "gpus"})),
        ),
    ]
