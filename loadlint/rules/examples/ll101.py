"""LL101 (missing-distributed-sampler): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        dist.init_process_group("nccl")
        loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds))
    """),
    # The branch runs in a single process: wav2vec2's transcription.
    Valid("""
        import os
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        multi_gpu = int(os.environ.get("WORLD_SIZE", 1)) > 1
        if multi_gpu:
            dist.init_process_group("nccl")
        def transcribe(ds):
            assert not multi_gpu, "transcription runs on one GPU"
            return DataLoader(ds, batch_size=8)
    """),
    # Each rank loads its own part of the indices (PyG's multi-GPU examples).
    Valid("""
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        def run(rank, world_size, idx):
            dist.init_process_group("nccl", rank=rank, world_size=world_size)
            idx = idx.split(idx.size(0) // world_size)[rank]
            return DataLoader(idx, batch_size=1024, shuffle=True)
    """),
    # A conditional sampler is still a sampler.
    Valid("""
        import torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler
        dist.init_process_group("gloo")
        sampler = DistributedSampler(ds) if distributed else None
        loader = DataLoader(ds, batch_size=8, sampler=sampler, shuffle=(sampler is None))
    """),
    # Not distributed.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=8, num_workers=2)
    """),
    # A framework owns sampling.
    Valid("""
        import torch.distributed as dist
        from accelerate import Accelerator
        from torch.utils.data import DataLoader
        accelerator = Accelerator()
        dist.get_rank()
        loader = DataLoader(ds, batch_size=8, num_workers=2)
        model, loader = accelerator.prepare(model, loader)
    """),
    Valid("""
        import lightning as L
        import os
        from torch.utils.data import DataLoader
        RANK = int(os.environ["LOCAL_RANK"])
        class Data(L.LightningDataModule):
            def train_dataloader(self):
                return DataLoader(self.ds, batch_size=8, num_workers=2)
    """),
    # Substring is not evidence: accelerate's DistributedDataParallelKwargs is not DDP.
    Valid("""
        from accelerate.utils import DistributedDataParallelKwargs
        from torch.utils.data import DataLoader
        kwargs = DistributedDataParallelKwargs(find_unused_parameters=True)
        loader = DataLoader(ds, batch_size=8, num_workers=2)
    """),
    # A Flax script reading the rank as boilerplate: JAX, not torch.distributed.
    Valid("""
        import os
        import jax
        from flax.training import train_state
        from torch.utils.data import DataLoader
        env_local_rank = int(os.environ.get("LOCAL_RANK", -1))
        loader = DataLoader(MyData(), batch_size=32, num_workers=2, collate_fn=numpy_collate)
    """),
    # Batch samplers shard too.
    Valid("""
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        dist.init_process_group("nccl")
        loader = DataLoader(ds, batch_sampler=bs, num_workers=2)
    """),
    # Only rank 0 reads it: no rank repeats another's work.
    Valid("""
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        def main(args):
            dist.init_process_group("nccl")
            val_loader = DataLoader(val_set, batch_size=64)
            if args.rank == 0:
                for batch in val_loader:
                    evaluate(batch)
    """),
    Valid("""
        import torch.multiprocessing as mp
        from torch.utils.data import DataLoader
        def worker(gpu, args):
            val_loader = DataLoader(val_set, batch_size=64)
            if not args.multiprocessing_distributed or args.rank % args.ngpus == 0:
                validate(val_loader, model)
        mp.spawn(worker, nprocs=2)
    """),
    # The tail a DistributedSampler(drop_last=True) left out, scored on purpose.
    Valid("""
        import torch.distributed as dist
        from torch.utils.data import DataLoader, Subset
        def validate(val_loader, args):
            dist.init_process_group("nccl")
            aux_val_dataset = Subset(val_loader.dataset,
                                     range(len(val_loader.sampler) * args.world_size, len(val_loader.dataset)))
            aux_val_loader = DataLoader(aux_val_dataset, batch_size=args.batch_size, shuffle=False)
            run_validate(aux_val_loader)
    """),
    # An IterableDataset cannot take a sampler.
    Valid("""
        import torch.distributed as dist
        from torch.utils.data import DataLoader, IterableDataset
        class Stream(IterableDataset):
            def __iter__(self):
                yield 1
        dist.init_process_group("nccl")
        loader = DataLoader(Stream(), batch_size=8)
    """),
]
INVALID = [
    Invalid(
        """
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        dist.init_process_group("nccl")
        loader = DataLoader(train_set, batch_size=32, shuffle=True)
        for epoch in range(10):
            for batch in loader:
                step(batch)
        """,
        message="every rank iterates the whole dataset: the module trains distributed "
        "(`torch.distributed.init_process_group`) but this DataLoader has no `sampler`; "
        "pass `sampler=DistributedSampler(dataset)`",
        fixed="""
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        dist.init_process_group("nccl")
        loader = DataLoader(train_set, batch_size=32, sampler=DistributedSampler(train_set, shuffle=True))
        for epoch in range(10):
            loader.sampler.set_epoch(epoch)
            for batch in loader:
                step(batch)
        """,
        line=4,
    ),
    Invalid(
        """
        import os
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data import DataLoader

        def main():
            model = DDP(net)
            loader = DataLoader(
                dataset,
                batch_size=32,
            )
        """,
        fixed="""
        import os
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        def main():
            model = DDP(net)
            loader = DataLoader(
                dataset,
                batch_size=32,
                sampler=DistributedSampler(dataset, shuffle=False),
            )
        """,
    ),
    Invalid(
        """
        import os
        from torch.utils.data import DataLoader
        local_rank = int(os.environ["LOCAL_RANK"])
        loader = DataLoader(MyData(), batch_size=32)
        """,
    ),
    # JAX imported, but torch.distributed is started too: evidence.
    Invalid(
        """
        import os
        import jax
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        local_rank = int(os.environ["LOCAL_RANK"])
        dist.init_process_group("nccl")
        loader = DataLoader(MyData(), batch_size=32)
        """,
    ),
    # Read on rank 0 and also on every rank: duplicated work.
    Invalid(
        """
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        def main(args):
            dist.init_process_group("nccl")
            val_loader = DataLoader(val_set, batch_size=64)
            if args.rank == 0:
                log(len(val_loader))
            validate(val_loader)
        """,
        fixed="""
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        def main(args):
            dist.init_process_group("nccl")
            val_loader = DataLoader(val_set, batch_size=64, sampler=DistributedSampler(val_set, shuffle=False))
            if args.rank == 0:
                log(len(val_loader))
            validate(val_loader)
        """,
        line=5,
    ),
    # A whole node's processes pass `node_rank == 0`.
    Invalid(
        """
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        def main(args):
            dist.init_process_group("nccl")
            val_loader = DataLoader(val_set, batch_size=64)
            if args.node_rank == 0:
                validate(val_loader)
        """,
        fixed="""
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        def main(args):
            dist.init_process_group("nccl")
            val_loader = DataLoader(val_set, batch_size=64, sampler=DistributedSampler(val_set, shuffle=False))
            if args.node_rank == 0:
                validate(val_loader)
        """,
        line=5,
    ),
    Invalid(
        """
        import torch.multiprocessing as mp
        from torch.utils.data import DataLoader
        def worker(rank):
            loader = DataLoader(ds, batch_size=32, num_workers=2)
        mp.spawn(worker, nprocs=2)
        """,
        fixed="""
        import torch.multiprocessing as mp
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        def worker(rank):
            loader = DataLoader(ds, batch_size=32, num_workers=2, sampler=DistributedSampler(ds, shuffle=False))
        mp.spawn(worker, nprocs=2)
        """,
    ),
]
