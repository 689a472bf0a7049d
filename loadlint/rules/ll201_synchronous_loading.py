from __future__ import annotations

from typing import Iterator

from loadlint.facts.loaders import LoaderCall
from loadlint.facts.values import MISSING, Origin
from loadlint.rules import unimportable_dataset, worker_hazards
from loadlint.rules.base import Context, FixSpec, Invalid, Report, Rule, Valid
from loadlint.rules.trainer_workers import training_arguments
from loadlint.rules.shared import (
    measured_defers, origin_note, set_workers_fix, suggested_workers, unguarded_script, use_workers,
    WORKERS_CONSTANT, waits,
)
from loadlint.types import HardwareProfile

#: No target declared, on a machine with 8 CPUs.
_NO_TARGET = HardwareProfile(usable_cpus=1, here_cpus=8)
_CPU16 = HardwareProfile(usable_cpus=16, gpu_count=0, declared=frozenset({"cpus", "gpus"}))

#: The examples' replay buffer: the training loop keeps filling it.
_REPLAY = """
from torch.utils.data import DataLoader, IterableDataset, get_worker_info
class Replay(IterableDataset):
    def __init__(self, buffer):
        self.buffer = buffer
    def __iter__(self):
        {iterate}
def train(buffer):
    loader = DataLoader(Replay(buffer), batch_size=8{workers})
    for batch in loader:
        buffer.append(step(batch))
"""

def _workers_fix(ctx: Context, call: LoaderCall, n: int, found: Origin | None, hazards: list[str]) -> FixSpec:
    """Set the worker count, or raise the default it comes from."""
    fix = set_workers_fix(ctx, call.node, "num_workers", n, found)
    if hazards:
        fix.applicability = "unsafe"
        fix.message += f" (unsafe: {'; '.join(hazards)})"
    return fix


class SynchronousLoading(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls whose `num_workers` is missing or `0`.

    The known DataLoader subclasses (MONAI's `DataLoader`, PyG's
    `DataLoader` and `DenseDataLoader`: README, Rules) are checked like
    torch's own: they forward these keywords to it.

    ## Why is this bad?
    With `num_workers=0` every batch is read, decoded and collated in the
    training process itself, between two training steps: the GPU waits while
    the CPU loads.  With workers, batches are prepared in the background while
    the model trains.  PyTorch's profiler reports the same pattern
    ("Detected DataLoader running with synchronized implementation").

    The suggestion is the worker formula (docs/hardware.md) on the declared
    target's `cpus` (capped by the batch size and memory; the message names
    the target).  Without a declared `cpus` the fix writes code applying the
    formula where the script runs, and the message quotes what it gives on
    this machine as a hint.

    The rule stays silent when `num_workers` cannot be resolved statically,
    and where the dataset is not a loading pipeline (`facts/in_memory.py`),
    workers only adding overhead: a `TensorDataset`; a range or tensor of
    indices (`range(t.size(0))`, `mask.nonzero().view(-1)`, a rank's
    `split`); a list, tuple or comprehension of in-memory values or a tensor
    from `torch.arange`/`randn`/`zeros`/... (without a custom `collate_fn`);
    a `Dataset` class of the module whose `__getitem__` only indexes what
    its `__init__` (or its own first read: `if self.x is None: self.x =
    torch.randn(...)`) builds from such values, or hands on as it is what
    `__init__` stored (a prompt).  The dataset is followed through each
    binding of its name, the callers passing a parameter and a helper's
    returns.  Any other call in `__getitem__`, a file read in `__init__`,
    or a container passed in from outside keeps the finding.  A dataset
    fed by a generator method of the object building the loader
    (lightning-bolts' `ExperienceSourceDataset(self.train_batch)`, stepping
    the environment with the policy being trained) is a live source: no
    finding, since workers would run frozen copies of the model.
    Project analysis applies the class test to a class imported from
    another module of the project (`from helpers.datasets import
    RandomDataset`): the finding is taken back, and `fix` leaves that
    loader alone.  A class from an installed package keeps the finding.

    Pre-tokenized Hugging Face rows padded into batches stay silent too: a
    `collate_fn` that is a `transformers` data collator
    (`DataCollatorWithPadding(tokenizer)`, `default_data_collator`, ...) or
    a function that only returns `tokenizer.pad(batch, ...)` (each of them,
    for a name bound in branches), over a split (`tokenized_datasets["train"]`)
    or a `.map(...)` result, in a module that sets no per-item transform
    (`set_transform`, `with_transform`).
    Measured with `benchmarks/pretokenized.py` (2 CPUs): a batch of 8
    costs 1.6 to 1.9 ms in the training process, and 1 or 2 workers made it
    0.41x to 0.56x as fast (moving each batch back from a worker costs more
    than building it); `loadlint verify` refuted workers on both shapes
    (0.40x and 0.60x, with other work on the machine).  Hugging Face's
    `Trainer` defaults to 0 workers too.

    A command-line default counts (`num_workers=args.workers` with
    `parser.add_argument("--workers", default=0)`, dataclass fields parsed by
    `HfArgumentParser`): it is what the script runs with unless the user
    passes the option, and the message names it.  So is the default of a
    parameter that every call in the module leaves out
    (`def build(ds, workers=0)` called as `build(train_ds)`), and the
    default of a config object: a yacs `CfgNode` tree, a dataclass field,
    `OmegaConf.create({...})`, or a YAML file beside the code that Hydra
    (`@hydra.main(config_path=..., config_name=...)`) or
    `OmegaConf.load("config.yaml")` reads.  What may change it stays unknown;
    LL203's page lists the limits.

    Hugging Face's `Trainer` builds its loaders from `TrainingArguments`
    (`dataloader_num_workers` defaults to 0): a `TrainingArguments(...)` or
    `Seq2SeqTrainingArguments(...)` call without workers is reported too
    (what its datasets hold is not known there); arguments parsed from the
    command line stay silent.

    Where workers would change what is loaded, the finding says so instead
    of suggesting a worker count: an `IterableDataset` whose `__iter__`
    reads an object handed in by the training code (a replay buffer, a
    queue) that this code keeps changing, and that never calls
    `get_worker_info()`.  Each worker would sample its own frozen copy.

    A call that `loadlint fix --from-verify` rewrote carries a mark such as
    `# loadlint: measured 8.65x on 2 CPUs, 2026-12-04`: measured beats
    guessed, so the rule stays silent while the target has the measured
    machine's CPUs (and GPUs), and on other hardware it says the
    measurement was made elsewhere.

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
    when nothing at the call forbids multi-process loading.  `loadlint fix`
    never applies a fix that would introduce a finding, so this one is
    withheld, with the reason in the help line, where workers would make
    another rule fire: a script that iterates the loader at module level
    without the main guard while workers start with spawn or forkserver
    (LL013), an `IterableDataset` that does not shard by worker (LL104), a
    `collate_fn`/`worker_init_fn` that cannot be pickled for spawned workers
    (LL007), CUDA in the Dataset (LL105), or a random generator every worker
    would copy (LL103).  In a notebook under spawn or forkserver it is
    withheld unless the dataset is traced to a class of an importable module:
    a class of the notebook (LL012) or a dataset not traced at all (a
    parameter, `{"train": a, "test": b}[split]` over untraced entries) would
    fail in the workers.  It is also withheld for a loader built at a
    script's module level under spawn or forkserver when no loop over it is
    visibly in a function or under the main guard and a function iterates a
    parameter (`train(train_dataloader)`, which LL013 does not follow).  The
    other fixes on the same call still apply.  A live data source has no fix.

    ## References
    - [PyTorch: Multi-process data loading](https://pytorch.org/docs/stable/data.html#multi-process-data-loading)
    - [Performance Tuning Guide: asynchronous data loading](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#enable-async-data-loading-and-augmentation)
    """

    code = "LL201"
    name = "synchronous-loading"
    category = "performance"
    summary = "`num_workers` missing or 0: batches load on the training thread"
    fix_availability = "sometimes"
    needs_hardware = True

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.all_calls:
            value = call.value("num_workers")
            if value is not MISSING and (type(value) is not int or value != 0):
                continue
            if not ctx.loading_pipeline(call):
                continue
            found = call.origin("num_workers")
            what = "`num_workers` is not set" if value is MISSING else "`num_workers=0`" + origin_note(found)
            live = ctx.live_source(call)
            if live is not None:
                cls, target, method = live
                message = (
                    f"{what}, but workers would change what is sampled: `{cls}.__iter__` reads `{target}`, which the "
                    f"training code keeps changing (`{target}.{method}(...)`), and each worker would sample its own "
                    "frozen copy of it; keep loading in the training process, or hand the workers the live data "
                    "explicitly (e.g. through a queue)"
                )
                yield Report(call.node, message)
                continue
            defers, elsewhere = measured_defers(ctx, call)
            if defers:
                continue  # measured on this hardware: the measurement wins over the guess
            n = suggested_workers(ctx, call)
            message = (
                f"{what}: batches are loaded in the training process, {waits(ctx)}; "
                f"{use_workers(ctx, 'num_workers', n)}{elsewhere}"
            )
            fix = _workers_fix(ctx, call, n, found, worker_hazards(ctx, call))
            fix.withheld = unguarded_script(ctx, call) or unimportable_dataset(ctx, call)
            yield Report(call.node, message, fix)
        yield from training_arguments(ctx)

    VALID = [
        # Set again after the config is made: unknown.
        Valid("""
            from omegaconf import OmegaConf
            from torch.utils.data import DataLoader
            cfg = OmegaConf.create({"data": {"num_workers": 0}})
            cfg.data.num_workers = args.workers
            loader = DataLoader(ds, batch_size=64, num_workers=cfg.data.num_workers)
        """),
        Valid("""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=32, num_workers=4)
        """),
        # Pre-tokenized rows padded by a transformers collator (whichever
        # branch binds it, as Hugging Face's example scripts do): workers measured slower.
        Valid("""
            from torch.utils.data import DataLoader
            from transformers import DataCollatorWithPadding, default_data_collator
            tokenized_datasets = raw_datasets.map(tokenize_function, batched=True)
            if args.pad_to_max_length:
                data_collator = default_data_collator
            else:
                data_collator = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8)
            loader = DataLoader(tokenized_datasets["train"], shuffle=True, collate_fn=data_collator, batch_size=8)
            evaluation = DataLoader(tokenized_datasets["test" if args.mnli else "val"], collate_fn=data_collator)
        """),
        Valid("""
            from torch.utils.data import DataLoader
            def collate_fn(examples):
                return tokenizer.pad(examples, padding="longest", return_tensors="pt")
            loader = DataLoader(tokenized_datasets["train"], shuffle=True, collate_fn=collate_fn, batch_size=8)
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
        # Held in memory: workers would only add overhead.
        Valid("""
            import torch as T
            from torch.utils.data import DataLoader
            a = DataLoader(range(10), batch_size=4)
            b = DataLoader([1, 2, 3], batch_size=2)
            c = DataLoader([i * 2 for i in range(8)])
            d = DataLoader(T.arange(10), shuffle=True)
        """),
        Valid("""
            import torch
            from torch.utils.data import DataLoader, Dataset
            class RandomDataset(Dataset):
                def __init__(self, size, length):
                    self.len = length
                    self.data = torch.randn(length, size)
                def __getitem__(self, index):
                    return self.data[index]
                def __len__(self):
                    return self.len
            loader = DataLoader(RandomDataset(32, 64), batch_size=2)
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
        # Transformed item by item as it is read: real work per row.
        Invalid(
            """
            from torch.utils.data import DataLoader
            from transformers import DefaultDataCollator
            ds = load_dataset("food101", split="train[:5000]").train_test_split(test_size=0.2)
            ds.set_transform(augment_and_process)
            loader = DataLoader(ds["train"], shuffle=True, batch_size=8, collate_fn=DefaultDataCollator())
            """,
            fixed="""
            from torch.utils.data import DataLoader
            from transformers import DefaultDataCollator
            ds = load_dataset("food101", split="train[:5000]").train_test_split(test_size=0.2)
            ds.set_transform(augment_and_process)
            loader = DataLoader(ds["train"], shuffle=True, batch_size=8, collate_fn=DefaultDataCollator(), num_workers=2)
            """,
        ),
        # A collate function that does more than pad.
        Invalid(
            """
            from torch.utils.data import DataLoader
            def collate_fn(examples):
                images = [load_image(e["path"]) for e in examples]
                return tokenizer.pad(examples, return_tensors="pt")
            loader = DataLoader(tokenized_datasets["train"], collate_fn=collate_fn, batch_size=8)
            """,
            fixed="""
            from torch.utils.data import DataLoader
            def collate_fn(examples):
                images = [load_image(e["path"]) for e in examples]
                return tokenizer.pad(examples, return_tensors="pt")
            loader = DataLoader(tokenized_datasets["train"], collate_fn=collate_fn, batch_size=8, num_workers=2)
            """,
        ),
        # One branch binds a collate function that does more than pad.
        Invalid(
            """
            from torch.utils.data import DataLoader
            from transformers import default_data_collator
            if args.pad_to_max_length:
                data_collator = default_data_collator
            else:
                data_collator = augment_and_pad
            loader = DataLoader(tokenized_datasets["train"], collate_fn=data_collator, batch_size=8)
            """,
            fixed="""
            from torch.utils.data import DataLoader
            from transformers import default_data_collator
            if args.pad_to_max_length:
                data_collator = default_data_collator
            else:
                data_collator = augment_and_pad
            loader = DataLoader(tokenized_datasets["train"], collate_fn=data_collator, batch_size=8, num_workers=2)
            """,
        ),
        # A config object's default (OmegaConf, yacs, dataclass): the message
        # names it, the fix changes the default.
        Invalid(
            """
            from omegaconf import OmegaConf
            from torch.utils.data import DataLoader
            cfg = OmegaConf.create({"data": {"num_workers": 0}})
            loader = DataLoader(ds, batch_size=64, num_workers=cfg.data.num_workers)
            """,
            message="`num_workers=0` (with the default `data.num_workers: 0`): batches are loaded in the training "
            "process, the training step waits; use `num_workers=15` (target: 16 CPUs, 0 GPUs)",
            fixed="""
            from omegaconf import OmegaConf
            from torch.utils.data import DataLoader
            cfg = OmegaConf.create({"data": {"num_workers": 15}})
            loader = DataLoader(ds, batch_size=64, num_workers=cfg.data.num_workers)
            """,
            profile=_CPU16,
        ),
        # A file read in __getitem__, a container passed from outside, a
        # custom collate_fn: not known to be in memory.
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader, Dataset
            class Images(Dataset):
                def __init__(self, paths):
                    self.paths = paths
                def __getitem__(self, i):
                    return torch.load(self.paths[i])
            a = DataLoader(Images(["a.pt"]))
            b = DataLoader([load(p) for p in paths])
            c = DataLoader(range(10), collate_fn=tokenize)
            """,
            fixed="""
            import torch
            from torch.utils.data import DataLoader, Dataset
            class Images(Dataset):
                def __init__(self, paths):
                    self.paths = paths
                def __getitem__(self, i):
                    return torch.load(self.paths[i])
            a = DataLoader(Images(["a.pt"]), num_workers=2)
            b = DataLoader([load(p) for p in paths], num_workers=2)
            c = DataLoader(range(10), collate_fn=tokenize, num_workers=2)
            """,
            count=3,
        ),
        Invalid(
            _REPLAY.format(iterate="yield from self.buffer.sample(32)", workers=""),
            message="`num_workers` is not set, but workers would change what is sampled: `Replay.__iter__` reads "
            "`buffer`, which the training code keeps changing (`buffer.append(...)`), and each worker would sample "
            "its own frozen copy of it; keep loading in the training process, or hand the workers the live data "
            "explicitly (e.g. through a queue)",
            line=8,
        ),
        # A stream that shards by worker is an ordinary case.
        Invalid(
            _REPLAY.format(iterate="yield from self.buffer.sample(32, get_worker_info())", workers=""),
            fixed=_REPLAY.format(iterate="yield from self.buffer.sample(32, get_worker_info())", workers=", num_workers=2"),
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=64)
            """,
            message="`num_workers` is not set: batches are loaded in the training process, the training step waits; "
            "use `num_workers=15` (target: 16 CPUs, 0 GPUs)",
            fixed="""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=64, num_workers=15)
            """,
            profile=_CPU16,
            line=2,
        ),
        # No CPU count declared: the fix computes the workers where the script runs.
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=64)
            for batch in loader:
                batch.to("cuda")
            """,
            message="`num_workers` is not set: batches are loaded in the training process, the accelerator waits; "
            "start workers from the usable CPUs at run time (7 on this machine; no target declared)",
            fixed="""
            import torch
            from torch.utils.data import DataLoader
            import os
            %s
            loader = DataLoader(ds, batch_size=64, num_workers=LOADER_WORKERS)
            for batch in loader:
                batch.to("cuda")
            """ % "\n            ".join(WORKERS_CONSTANT),
            profile=_NO_TARGET,
        ),
        Invalid(
            """
            import torch
            loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=0)
            """,
            message="`num_workers=0`: batches are loaded in the training process, the training step waits; "
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
            loader = tud.DataLoader(ds, num_workers=2)
            """,
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader as DL
            loader = DL(ds, 8, True, None, None, 0)
            """,
            fixed="""
            from torch.utils.data import DataLoader as DL
            loader = DL(ds, 8, True, None, None, 2)
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
                num_workers=2,
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
                return T.utils.data.dataloader.DataLoader(ds, **kwargs, num_workers=2)
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
            loader = DataLoader(ds, collate_fn=lambda b: b, num_workers=2)
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
            "the training step waits; use `num_workers=15` (target: 16 CPUs, 0 GPUs)",
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
            "the training step waits; use `dataloader_num_workers=15` (target: 16 CPUs, 0 GPUs)",
            fixed="""
            from transformers import Trainer, TrainingArguments
            args = TrainingArguments(output_dir="out", per_device_train_batch_size=32, dataloader_num_workers=15)
            Trainer(model=model, args=args, train_dataset=ds).train()
            """,
            profile=_CPU16,
            line=2,
        ),
    ]
