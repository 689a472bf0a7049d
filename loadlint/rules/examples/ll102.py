"""LL102 (missing-set-epoch): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=4, sampler=sampler)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            for batch in loader:
                step(batch)
    """),
    # Through a helper, as in the DDP tutorial.
    Valid("""
        from torch.utils.data import DataLoader, DistributedSampler
        class Trainer:
            def __init__(self, ds):
                self.train_data = DataLoader(ds, batch_size=4, sampler=DistributedSampler(ds))
            def _run_epoch(self, epoch):
                self.train_data.sampler.set_epoch(epoch)
                for batch in self.train_data:
                    self.step(batch)
            def train(self, epochs):
                for epoch in range(epochs):
                    self._run_epoch(epoch)
    """),
    Valid("""
        from torch.utils.data import DataLoader, DistributedSampler
        loader = DataLoader(ds, batch_size=4, sampler=DistributedSampler(ds, shuffle=False))
        for epoch in range(3):
            for batch in loader:
                step(batch)
    """),
    # Not iterated in a loop.
    Valid("""
        from torch.utils.data import DataLoader, DistributedSampler
        loader = DataLoader(ds, batch_size=4, sampler=DistributedSampler(ds))
        for batch in loader:
            step(batch)
    """),
    # Chosen in branches, `set_epoch` called in the loop.
    Valid("""
        from torch.utils.data import DataLoader, RandomSampler
        from torch.utils.data.distributed import DistributedSampler
        def main(args, train_data):
            if args.local_rank == -1:
                train_sampler = RandomSampler(train_data)
            else:
                train_sampler = DistributedSampler(train_data)
            train_dataloader = DataLoader(train_data, sampler=train_sampler, batch_size=32)
            for epoch in range(args.epochs):
                if args.local_rank != -1:
                    train_sampler.set_epoch(epoch)
                for batch in train_dataloader:
                    step(batch)
    """),
    Valid("""
        import lightning as L
        from torch.utils.data import DataLoader, DistributedSampler
        loader = DataLoader(ds, batch_size=4, sampler=DistributedSampler(ds))
        trainer = L.Trainer()
        for epoch in range(3):
            for batch in loader:
                step(batch)
    """),
]
INVALID = [
    Invalid(
        """
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=4, sampler=sampler)
        for epoch in range(3):
            for batch in loader:
                step(batch)
        """,
        message="`DistributedSampler` shuffles with the same seed every epoch: its loader is iterated in an epoch "
        "loop but `set_epoch` is never called; call `sampler.set_epoch(epoch)` at the start of each epoch",
        fixed="""
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=4, sampler=sampler)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            for batch in loader:
                step(batch)
        """,
        line=3,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader, DistributedSampler
        def train(ds, epochs):
            train_loader = DataLoader(ds, batch_size=4, sampler=DistributedSampler(ds, shuffle=True))
            for epoch in range(epochs):
                for i, batch in enumerate(train_loader):
                    step(batch)
        """,
        fixed="""
        from torch.utils.data import DataLoader, DistributedSampler
        def train(ds, epochs):
            train_loader = DataLoader(ds, batch_size=4, sampler=DistributedSampler(ds, shuffle=True))
            for epoch in range(epochs):
                train_loader.sampler.set_epoch(epoch)
                for i, batch in enumerate(train_loader):
                    step(batch)
        """,
        line=3,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader, DistributedSampler
        def main(ds, distributed):
            sampler = DistributedSampler(ds) if distributed else None
            loader = DataLoader(ds, batch_size=4, sampler=sampler, shuffle=(sampler is None))
            for epoch in range(10):
                for batch in loader:
                    step(batch)
        """,
        fixed="""
        from torch.utils.data import DataLoader, DistributedSampler
        def main(ds, distributed):
            sampler = DistributedSampler(ds) if distributed else None
            loader = DataLoader(ds, batch_size=4, sampler=sampler, shuffle=(sampler is None))
            for epoch in range(10):
                if sampler is not None: sampler.set_epoch(epoch)
                for batch in loader:
                    step(batch)
        """,
    ),
    # A sampler chosen in branches (NVIDIA's BERT `run_glue.py`, DeepSpeed's GLUE and Chat scripts).
    Invalid(
        """
        from torch.utils.data import DataLoader, RandomSampler
        from torch.utils.data.distributed import DistributedSampler
        def main(args, train_data):
            if args.local_rank == -1:
                train_sampler = RandomSampler(train_data)
            else:
                train_sampler = DistributedSampler(train_data)
            train_dataloader = DataLoader(train_data, sampler=train_sampler, batch_size=32)
            for epoch in range(args.epochs):
                for batch in train_dataloader:
                    step(batch)
        """,
        message="`DistributedSampler` shuffles with the same seed every epoch: its loader is iterated in an epoch "
        "loop but `set_epoch` is never called; call `sampler.set_epoch(epoch)` at the start of each epoch",
        fixed="""
        from torch.utils.data import DataLoader, RandomSampler
        from torch.utils.data.distributed import DistributedSampler
        def main(args, train_data):
            if args.local_rank == -1:
                train_sampler = RandomSampler(train_data)
            else:
                train_sampler = DistributedSampler(train_data)
            train_dataloader = DataLoader(train_data, sampler=train_sampler, batch_size=32)
            for epoch in range(args.epochs):
                if hasattr(train_sampler, "set_epoch"): train_sampler.set_epoch(epoch)
                for batch in train_dataloader:
                    step(batch)
        """,
        line=7,
    ),
    # The loader wrapped in a progress bar on the main process only (NVIDIA's BERT `run_squad.py`).
    Invalid(
        """
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        from tqdm import tqdm
        def main(args, train_data):
            train_sampler = DistributedSampler(train_data)
            train_dataloader = DataLoader(train_data, sampler=train_sampler, batch_size=32)
            for epoch in range(args.epochs):
                train_iter = tqdm(train_dataloader, desc="Iteration") if is_main_process() else train_dataloader
                for step, batch in enumerate(train_iter):
                    step(batch)
        """,
        fixed="""
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        from tqdm import tqdm
        def main(args, train_data):
            train_sampler = DistributedSampler(train_data)
            train_dataloader = DataLoader(train_data, sampler=train_sampler, batch_size=32)
            for epoch in range(args.epochs):
                train_sampler.set_epoch(epoch)
                train_iter = tqdm(train_dataloader, desc="Iteration") if is_main_process() else train_dataloader
                for step, batch in enumerate(train_iter):
                    step(batch)
        """,
        line=5,
    ),
    # An epoch loop without a loop variable: reported, no fix.
    Invalid(
        """
        from torch.utils.data import DataLoader, DistributedSampler
        loader = DataLoader(ds, batch_size=4, sampler=DistributedSampler(ds))
        while not done():
            for batch in loader:
                step(batch)
        """,
    ),
]
