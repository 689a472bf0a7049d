"""LL204 (non-persistent-workers): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.types import HardwareProfile
from loadlint.rules.base import Invalid, Valid

#: The examples' train and test loaders of one function, the first persistent.
_TRAIN_AND_TEST = """
from torch.utils.data import DataLoader
def main():
    train = DataLoader(ds, num_workers=3, persistent_workers=True)
    test = DataLoader(ds, num_workers=3)
    for epoch in range(10):
        for batch in train:
            step(batch)
        for batch in test:
            step(batch)
"""

#: Counts known only where the program runs, each positive there.
_RUN_TIME_COUNTS = """
import os
from torch.utils.data import DataLoader
LOADER_WORKERS = max(1, (getattr(os, "process_cpu_count", os.cpu_count)() or 1) - 1)
def main(a, b, c, fast):
    first = DataLoader(a, num_workers=os.cpu_count())
    second = DataLoader(b, num_workers=LOADER_WORKERS)
    third = DataLoader(c, num_workers=1 if fast else 2)
    for epoch in range(3):
        for loader in [first, second, third]:
            for batch in loader:
                step(batch)
"""


VALID = [
    # fit runs the train and validation hooks every epoch; test and predict run theirs once.
    Valid("""
        import lightning as L
        from torch.utils.data import DataLoader
        class Data(L.LightningDataModule):
            def train_dataloader(self):
                return DataLoader(self.train, batch_size=32, num_workers=2, persistent_workers=True)
            def test_dataloader(self):
                return DataLoader(self.test, batch_size=32, num_workers=2)
            def predict_dataloader(self):
                return DataLoader(self.test, batch_size=32, num_workers=2)
    """),
    # Each loader of the dict is iterated once.
    Valid("""
        from torch.utils.data import DataLoader
        loaders = {"train": DataLoader(a, num_workers=4), "val": DataLoader(b, num_workers=4)}
        for name, loader in loaders.items():
            for batch in loader:
                step(batch)
    """),
    # The key is known only at run time.
    Valid("""
        from torch.utils.data import DataLoader
        def run(phase):
            loaders = {"train": DataLoader(a, num_workers=4)}
            for epoch in range(3):
                for batch in loaders[phase]:
                    step(batch)
    """),
    # The holder's attribute is assigned again: which loader it holds is unknown.
    Valid("""
        from torch.utils.data import DataLoader
        class Phase:
            def __init__(self, loader):
                self.loader = loader
            def swap(self, other):
                self.loader = other
        def run(a, epochs):
            phase = Phase(DataLoader(a, num_workers=4))
            for epoch in range(epochs):
                for batch in phase.loader:
                    step(batch)
    """),
    # The member is replaced before the loop.
    Valid("""
        from torch.utils.data import DataLoader
        def run(other):
            loaders = {"train": DataLoader(a, num_workers=4)}
            loaders["train"] = other
            for epoch in range(3):
                for batch in loaders["train"]:
                    step(batch)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4, persistent_workers=True)
        for epoch in range(3):
            for batch in loader:
                step(batch)
    """),
    # Not positive for every input: `os.cpu_count() - 1` is 0 on one CPU.
    Valid("""
        import os
        from torch.utils.data import DataLoader
        def main(ds):
            loader = DataLoader(ds, num_workers=os.cpu_count() - 1)
            for epoch in range(3):
                for batch in loader:
                    step(batch)
    """),
    # Iterated once.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4)
        for batch in loader:
            step(batch)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=0)
        for epoch in range(3):
            for batch in loader:
                step(batch)
    """),
    # Built inside the loop: LL206.
    Valid("""
        from torch.utils.data import DataLoader
        for epoch in range(3):
            loader = DataLoader(ds, num_workers=4)
            for batch in loader:
                step(batch)
    """),
    Valid("""
        from torch.utils.data import DataLoader
        def build(ds, **kwargs):
            loader = DataLoader(ds, num_workers=4, **kwargs)
            for epoch in range(3):
                for batch in loader:
                    step(batch)
    """),
    # Built by the function each epoch calls: a new loader every epoch,
    # whose workers die with it (torchvision's embedding `evaluate`).
    Valid("""
        from torch.utils.data import DataLoader
        def evaluate(model, dataset):
            loader = DataLoader(dataset, batch_size=512, num_workers=4)
            for batch in loader:
                model(batch)
        def main():
            for epoch in range(10):
                evaluate(model, test_set)
    """),
    # Kept alive beside `train`'s 3, the test loader's 3 workers would be
    # 6 on 4 usable CPUs (LL203): which loader keeps its workers is the author's choice.
    Valid(_TRAIN_AND_TEST, profile=HardwareProfile(usable_cpus=4, gpu_count=1, declared=frozenset({"cpus", "gpus"}))),
    # One epoch: the Trainer iterates its loader once.
    Valid("""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="out", dataloader_num_workers=4, num_train_epochs=1)
    """),
    Valid("""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="out", dataloader_num_workers=4, dataloader_persistent_workers=True)
    """),
]
INVALID = [
    # 3 + 3 workers kept alive on 8 usable CPUs: room for both.
    Invalid(
        _TRAIN_AND_TEST,
        fixed=_TRAIN_AND_TEST.replace("num_workers=3)", "num_workers=3, persistent_workers=True)"),
        line=4,
        profile=HardwareProfile(usable_cpus=8, gpu_count=1),
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loaders = {"train": DataLoader(a, num_workers=4), "val": DataLoader(b, num_workers=4, persistent_workers=True)}
        for epoch in range(3):
            for batch in loaders["train"]:
                step(batch)
        """,
        fixed="""
        from torch.utils.data import DataLoader
        loaders = {"train": DataLoader(a, num_workers=4, persistent_workers=True), "val": DataLoader(b, num_workers=4, persistent_workers=True)}
        for epoch in range(3):
            for batch in loaders["train"]:
                step(batch)
        """,
    ),
    # A holder object in a dict: its attribute is the loader it was given.
    Invalid(
        """
        from torch.utils.data import DataLoader
        class Phase:
            def __init__(self, loader, train=True):
                self.loader = loader
                self.train = train
        def run(a, b, epochs):
            phases = {"train": Phase(DataLoader(a, num_workers=4)), "val": Phase(DataLoader(b, num_workers=4), False)}
            for epoch in range(epochs):
                for batch in phases["train"].loader:
                    step(batch)
        """,
        fixed="""
        from torch.utils.data import DataLoader
        class Phase:
            def __init__(self, loader, train=True):
                self.loader = loader
                self.train = train
        def run(a, b, epochs):
            phases = {"train": Phase(DataLoader(a, num_workers=4, persistent_workers=True)), "val": Phase(DataLoader(b, num_workers=4), False)}
            for epoch in range(epochs):
                for batch in phases["train"].loader:
                    step(batch)
        """,
        line=7,
    ),
    # Every loader of the list, each epoch.
    Invalid(
        """
        from torch.utils.data import DataLoader
        train = DataLoader(a, num_workers=4)
        val = DataLoader(b, num_workers=2)
        for epoch in range(3):
            for loader in [train, val]:
                for batch in loader:
                    step(batch)
        """,
        fixed="""
        from torch.utils.data import DataLoader
        train = DataLoader(a, num_workers=4, persistent_workers=True)
        val = DataLoader(b, num_workers=2, persistent_workers=True)
        for epoch in range(3):
            for loader in [train, val]:
                for batch in loader:
                    step(batch)
        """,
        count=2,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=2)
        for epoch in range(3):
            for batch in loader:
                step(batch)
        """,
        message="`persistent_workers` is not set: the 2 workers of this loader are started again at every epoch; "
        "set `persistent_workers=True`",
        fixed="""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True)
        for epoch in range(3):
            for batch in loader:
                step(batch)
        """,
        line=2,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        from tqdm import tqdm
        def train_one_epoch(model, loader):
            for x, y in tqdm(loader):
                model(x)
        def main():
            loader = DataLoader(ds, batch_size=4, num_workers=8, persistent_workers=False)
            for epoch in range(10):
                train_one_epoch(model, loader)
        """,
        fixed="""
        from torch.utils.data import DataLoader
        from tqdm import tqdm
        def train_one_epoch(model, loader):
            for x, y in tqdm(loader):
                model(x)
        def main():
            loader = DataLoader(ds, batch_size=4, num_workers=8, persistent_workers=True)
            for epoch in range(10):
                train_one_epoch(model, loader)
        """,
    ),
    Invalid(
        """
        import lightning as L
        from torch.utils.data import DataLoader
        class Data(L.LightningDataModule):
            def train_dataloader(self):
                return DataLoader(self.train, batch_size=32, num_workers=4)
        """,
        fixed="""
        import lightning as L
        from torch.utils.data import DataLoader
        class Data(L.LightningDataModule):
            def train_dataloader(self):
                return DataLoader(self.train, batch_size=32, num_workers=4, persistent_workers=True)
        """,
    ),
    # A count that may be 0 where the program runs: persistent only with workers.
    Invalid(
        """
        import argparse
        from torch.utils.data import DataLoader
        parser = argparse.ArgumentParser()
        parser.add_argument("--threads", type=int, default=4)
        opt = parser.parse_args()
        loader = DataLoader(ds, num_workers=opt.threads)
        for epoch in range(3):
            for batch in loader:
                step(batch)
        """,
        message="`persistent_workers` is not set: the 4 workers (with the default `--threads 4`) of this loader are "
        "started again at every epoch; set `persistent_workers=opt.threads > 0`",
        fixed="""
        import argparse
        from torch.utils.data import DataLoader
        parser = argparse.ArgumentParser()
        parser.add_argument("--threads", type=int, default=4)
        opt = parser.parse_args()
        loader = DataLoader(ds, num_workers=opt.threads, persistent_workers=opt.threads > 0)
        for epoch in range(3):
            for batch in loader:
                step(batch)
        """,
    ),
    # Positive on every machine without a known number: the CPU count, LL201's run-time constant.
    Invalid(
        _RUN_TIME_COUNTS,
        message="`persistent_workers` is not set: the workers of this loader (`num_workers=os.cpu_count()`) are "
        "started again at every epoch; set `persistent_workers=os.cpu_count() > 0`",
        fixed=_RUN_TIME_COUNTS.replace("os.cpu_count())", "os.cpu_count(), persistent_workers=os.cpu_count() > 0)")
        .replace("LOADER_WORKERS)", "LOADER_WORKERS, persistent_workers=LOADER_WORKERS > 0)")
        .replace("else 2)", "else 2, persistent_workers=(1 if fast else 2) > 0)"),
        count=3,
        line=5,
    ),
    # Under distributed training LL203 replaces `os.cpu_count()` first.
    Invalid(
        """
        import os
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        dist.init_process_group("nccl")
        loader = DataLoader(ds, sampler=sampler, num_workers=os.cpu_count())
        for epoch in range(3):
            for batch in loader:
                step(batch)
        """,
        fixed=None,
    ),
    Invalid(
        """
        from transformers import Seq2SeqTrainingArguments
        args = Seq2SeqTrainingArguments(output_dir="out", dataloader_num_workers=4)
        """,
        message="`dataloader_persistent_workers` is not set: the Trainer iterates its loader every epoch and "
        "starts its 4 workers again each time; set `dataloader_persistent_workers=True`",
        fixed="""
        from transformers import Seq2SeqTrainingArguments
        args = Seq2SeqTrainingArguments(output_dir="out", dataloader_num_workers=4, dataloader_persistent_workers=True)
        """,
    ),
]
