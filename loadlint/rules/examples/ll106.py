"""LL106 (per-rank-sampler-seed): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        sampler = DistributedSampler(ds, num_replicas=dist.get_world_size(), rank=dist.get_rank(), seed=args.seed)
        loader = DataLoader(ds, batch_size=32, sampler=sampler)
    """),
    # Not shuffled: the seed is never used.
    Valid("""
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        sampler = DistributedSampler(ds, shuffle=False, seed=args.seed + args.rank)
        loader = DataLoader(ds, batch_size=32, sampler=sampler)
    """),
    # Every process of a node has the same node rank.
    Valid("""
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        sampler = DistributedSampler(ds, seed=args.seed + args.node_rank)
        loader = DataLoader(ds, batch_size=32, sampler=sampler)
    """),
    # A per-rank seed for something else.
    Valid("""
        import torch
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        torch.manual_seed(args.seed + dist.get_rank())
        sampler = DistributedSampler(ds, seed=args.seed)
        loader = DataLoader(ds, batch_size=32, sampler=sampler)
    """),
]
INVALID = [
    # NVIDIA's TFT.
    Invalid(
        """
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        def loader(args, train_split):
            sampler = DistributedSampler(train_split, args.distributed_world_size, args.distributed_rank,
                                         seed=args.seed + args.distributed_rank, drop_last=True)
            return DataLoader(train_split, batch_size=64, sampler=sampler, num_workers=4)
        """,
        message="`DistributedSampler` seeded per rank (`seed=args.seed + args.distributed_rank`): each rank "
        "shuffles differently, so the ranks' shards overlap and some samples are never drawn; use the same seed "
        "on every rank",
        fixed="""
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        def loader(args, train_split):
            sampler = DistributedSampler(train_split, args.distributed_world_size, args.distributed_rank,
                                         seed=args.seed, drop_last=True)
            return DataLoader(train_split, batch_size=64, sampler=sampler, num_workers=4)
        """,
        line=4,
    ),
    Invalid(
        """
        import torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler
        sampler = DistributedSampler(ds, seed=dist.get_rank() + 1234)
        loader = DataLoader(ds, batch_size=32, sampler=sampler)
        """,
        fixed="""
        import torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler
        sampler = DistributedSampler(ds, seed=1234)
        loader = DataLoader(ds, batch_size=32, sampler=sampler)
        """,
    ),
    # Through a name bound once, and the environment: reported, no fix.
    Invalid(
        """
        import os
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        local_rank = int(os.environ["LOCAL_RANK"])
        seed = 42 + local_rank
        sampler = DistributedSampler(ds, seed=seed)
        loader = DataLoader(ds, batch_size=32, sampler=sampler)
        """,
        line=6,
    ),
    Invalid(
        """
        from accelerate import Accelerator
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        accelerator = Accelerator()
        sampler = DistributedSampler(ds, shuffle=True, seed=args.seed * (accelerator.process_index + 1))
        loader = DataLoader(ds, batch_size=32, sampler=sampler)
        """,
    ),
]
