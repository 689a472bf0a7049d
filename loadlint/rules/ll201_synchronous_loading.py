from __future__ import annotations

from typing import Iterator

from loadlint.facts.loaders import LoaderCall
from loadlint.resolve import MISSING, Origin
from loadlint.rules import worker_hazards
from loadlint.rules.base import CallChange, Context, FixSpec, Invalid, Report, Rule, Valid
from loadlint.rules.shared import (
    origin_note, origin_of, profile_note, set_argument_fix, suggested_workers, trainer_workers,
)
from loadlint.types import HardwareProfile

_CPU16 = HardwareProfile(usable_cpus=16, gpu_count=0, declared=frozenset({"cpus", "gpus"}))


def _default_fix(call: LoaderCall, n: int, found: Origin, hazards: list[str]) -> FixSpec:
    """Raise the command-line default the worker count comes from."""
    fix = set_argument_fix(call.node, "num_workers", str(n), found, f"Set `num_workers={n}`")
    if hazards:
        fix.applicability = "unsafe"
        fix.message += f" (unsafe: {'; '.join(hazards)})"
    return fix


def _training_arguments(ctx: Context) -> Iterator[Report]:
    """``TrainingArguments(...)`` without loader workers: the Trainer's
    loaders load in the training process."""
    for call in ctx.values.training_arguments:
        value = call.value("dataloader_num_workers")
        if value is not MISSING and (type(value) is not int or value != 0):
            continue
        n = trainer_workers(ctx, call)
        found = call.origin("dataloader_num_workers")
        what = ("`dataloader_num_workers` is not set" if value is MISSING
                else "`dataloader_num_workers=0`" + origin_note(found))
        message = (
            f"{what}: the Trainer loads every batch in the training process, the accelerator waits; "
            f"use `dataloader_num_workers={n}` ({profile_note(ctx)})"
        )
        fix = set_argument_fix(call.node, "dataloader_num_workers", str(n), found, f"Set `dataloader_num_workers={n}`")
        yield Report(call.node, message, fix)


class SynchronousLoading(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls whose `num_workers` is missing or `0`.

    ## Why is this bad?
    With `num_workers=0` every batch is read, decoded and collated in the
    training process itself, between two training steps: the GPU waits while
    the CPU loads.  With workers, batches are prepared in the background while
    the model trains.  PyTorch's profiler reports the same pattern
    ("Detected DataLoader running with synchronized implementation").

    The suggested value is computed for the target hardware (the usable CPUs
    of this machine, or `--target` / `[tool.loadlint.target]`), divided among
    the ranks of a node when the module trains with several GPUs:
    `max(1, usable_cpus // ranks_per_node - 1)`, capped by the batch size and
    the memory.  The message says which profile it used.

    The rule stays silent for an in-memory `TensorDataset` (workers only add
    overhead there) and when `num_workers` cannot be resolved statically.
    A command-line default counts (`num_workers=args.workers` with
    `parser.add_argument("--workers", default=0)`, dataclass fields parsed by
    `HfArgumentParser`): it is what the script runs with unless the user
    passes the option, and the message names it.  So is the default of a
    parameter that every call in the module leaves out
    (`def build(ds, workers=0)` called as `build(train_ds)`).

    Hugging Face's `Trainer` builds its loaders from `TrainingArguments`
    (`dataloader_num_workers` defaults to 0): a `TrainingArguments(...)` or
    `Seq2SeqTrainingArguments(...)` call without workers is reported too.
    Arguments parsed from the command line stay silent.

    ## Example
    ```python
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    ```

    Use instead:
    ```python
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=7)
    ```

    ## Fix safety
    The fix adds `num_workers=<suggestion>` (or replaces the `0`).  It is safe
    when nothing at the call forbids multi-process loading.  It is unsafe, and
    its message says why, when a `collate_fn`/`worker_init_fn` is a lambda or
    a nested function (it cannot be pickled for spawn/forkserver workers), the
    Dataset uses CUDA, or an `IterableDataset` does not shard by worker.

    ## References
    - [PyTorch: Multi-process data loading](https://pytorch.org/docs/stable/data.html#multi-process-data-loading)
    - [Performance Tuning Guide: asynchronous data loading](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#enable-async-data-loading-and-augmentation)
    """

    code = "LL201"
    name = "synchronous-loading"
    summary = "`num_workers` missing or 0: batches load on the training thread"
    fix_availability = "always"
    needs_hardware = True

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.calls:
            value = call.value("num_workers")
            if value is not MISSING and (type(value) is not int or value != 0):
                continue
            if ctx.is_tensor_dataset(call):
                continue
            n = suggested_workers(ctx, call)
            found = origin_of(call, "num_workers")
            what = "`num_workers` is not set" if value is MISSING else "`num_workers=0`" + origin_note(found)
            message = (
                f"{what}: batches are loaded in the training process, the accelerator waits; "
                f"use `num_workers={n}` ({profile_note(ctx)})"
            )
            hazards = worker_hazards(ctx, call)
            if found is None:
                fix = FixSpec(
                    "unsafe" if hazards else "safe",
                    f"Set `num_workers={n}`" + (f" (unsafe: {'; '.join(hazards)})" if hazards else ""),
                    calls=[CallChange(call.node, {"num_workers": str(n)})],
                )
            else:
                fix = _default_fix(call, n, found, hazards)
            yield Report(call.node, message, fix)
        yield from _training_arguments(ctx)

    VALID = [
        Valid("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=32, num_workers=4)
        """),
        Valid("""
            import torch
            from torch.utils.data import DataLoader, TensorDataset
            ds = TensorDataset(torch.zeros(10, 3))
            loader = DataLoader(ds, batch_size=2)
        """),
        Valid("""
            from torch.utils.data import DataLoader, TensorDataset
            loader = DataLoader(TensorDataset(x, y), batch_size=2)
        """),
        # Unresolvable values stay silent.
        Valid("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=args.workers)
        """),
        Valid("""
            from torch.utils.data import DataLoader
            def make(ds, **kwargs):
                return DataLoader(ds, **kwargs)
        """),
        # Not PyTorch's DataLoader.
        Valid("""
            from mylib import DataLoader
            loader = DataLoader(ds)
        """),
        Valid("""
            class Pipeline:
                def build(self):
                    return self.DataLoader(ds)
        """),
        # Positional slot 5 is num_workers.
        Valid("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, 32, True, None, None, 4)
        """),
            # A command-line option without a default, or one the code changes: unknown.
        Valid("""
            import argparse
            from torch.utils.data import DataLoader
            parser = argparse.ArgumentParser()
            parser.add_argument("--workers", type=int, required=True)
            args = parser.parse_args()
            loader = DataLoader(ds, num_workers=args.workers)
        """),
        # TrainingArguments read from the command line or a file: the user's choice.
        Valid("""
            import sys
            from transformers import HfArgumentParser, TrainingArguments
            parser = HfArgumentParser((ModelArguments, TrainingArguments))
            if sys.argv[1].endswith(".json"):
                model_args, training_args = parser.parse_json_file(sys.argv[1])
            else:
                model_args, training_args = parser.parse_args_into_dataclasses()
        """),
        Valid("""
            from transformers import TrainingArguments
            args = TrainingArguments(output_dir="out", dataloader_num_workers=4)
        """),
    ]
    INVALID = [
        Invalid(
            """
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=64)
            """,
            message="`num_workers` is not set: batches are loaded in the training process, the accelerator waits; "
            "use `num_workers=15` (target: 16 CPUs, 0 GPUs)",
            fixed="""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=64, num_workers=15)
            """,
            profile=_CPU16,
            line=2,
        ),
        Invalid(
            """
            import torch
            loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=0)
            """,
            message="`num_workers=0`: batches are loaded in the training process, the accelerator waits; "
            "use `num_workers=4` (target: 16 CPUs, 0 GPUs)",
            fixed="""
            import torch
            loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=4)
            """,
            profile=_CPU16,
        ),
        Invalid(
            """
            import torch.utils.data as tud
            NUM_WORKERS = 0
            loader = tud.DataLoader(ds, num_workers=NUM_WORKERS)
            """,
            fixed="""
            import torch.utils.data as tud
            NUM_WORKERS = 0
            loader = tud.DataLoader(ds, num_workers=1)
            """,
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader as DL
            loader = DL(ds, 8, True, None, None, 0)
            """,
            fixed="""
            from torch.utils.data import DataLoader as DL
            loader = DL(ds, 8, True, None, None, 1)
            """,
        ),
        Invalid(
            """
            from torch.utils import data
            loader = data.DataLoader(
                ds,
                batch_size=8,  # small batches
            )
            """,
            fixed="""
            from torch.utils import data
            loader = data.DataLoader(
                ds,
                batch_size=8,  # small batches
                num_workers=1,
            )
            """,
        ),
        Invalid(
            """
            import torch as T
            def main():
                kwargs = {"batch_size": 8}
                kwargs.update({"shuffle": True})
                return T.utils.data.dataloader.DataLoader(ds, **kwargs)
            """,
            fixed="""
            import torch as T
            def main():
                kwargs = {"batch_size": 8}
                kwargs.update({"shuffle": True})
                return T.utils.data.dataloader.DataLoader(ds, **kwargs, num_workers=1)
            """,
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, collate_fn=lambda b: b)
            """,
            message=None,
            fixed="""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, collate_fn=lambda b: b, num_workers=1)
            """,
        ),
            Invalid(
            """
            import argparse
            from torch.utils.data import DataLoader
            parser = argparse.ArgumentParser()
            parser.add_argument("-j", "--workers", default=0, type=int)
            args = parser.parse_args()
            loader = DataLoader(ds, batch_size=64, num_workers=args.workers)
            """,
            message="`num_workers=0` (with the default `--workers 0`): batches are loaded in the training process, "
            "the accelerator waits; use `num_workers=15` (target: 16 CPUs, 0 GPUs)",
            fixed="""
            import argparse
            from torch.utils.data import DataLoader
            parser = argparse.ArgumentParser()
            parser.add_argument("-j", "--workers", default=15, type=int)
            args = parser.parse_args()
            loader = DataLoader(ds, batch_size=64, num_workers=args.workers)
            """,
            profile=_CPU16,
            line=6,
        ),
        Invalid(
            """
            from transformers import Trainer, TrainingArguments
            args = TrainingArguments(output_dir="out", per_device_train_batch_size=32)
            Trainer(model=model, args=args, train_dataset=ds).train()
            """,
            message="`dataloader_num_workers` is not set: the Trainer loads every batch in the training process, "
            "the accelerator waits; use `dataloader_num_workers=15` (target: 16 CPUs, 0 GPUs)",
            fixed="""
            from transformers import Trainer, TrainingArguments
            args = TrainingArguments(output_dir="out", per_device_train_batch_size=32, dataloader_num_workers=15)
            Trainer(model=model, args=args, train_dataset=ds).train()
            """,
            profile=_CPU16,
            line=2,
        ),
    ]
