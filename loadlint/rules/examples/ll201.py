"""LL201 (synchronous-loading): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid
from loadlint.rules.shared import WORKERS_CONSTANT
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


VALID = [
    # The transforms run on the GPU: workers could not build these batches.
    Valid("""
        import monai.transforms as mt
        from monai.data import CacheDataset, DataLoader
        transform = mt.Compose([mt.LoadImageD(keys="image"), mt.EnsureTypeD(keys="image", device="cuda:0")])
        loader = DataLoader(CacheDataset(data=files, transform=transform), batch_size=1)
    """),
    # Only one batch is read, to look at it.
    Valid("""
        from monai.data import DataLoader, first
        check_loader = DataLoader(check_ds, batch_size=2)
        check_data = first(check_loader)
    """),
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
        """ % "\n        ".join(WORKERS_CONSTANT),
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
