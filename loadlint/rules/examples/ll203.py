"""LL203 (worker-oversubscription): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid
from loadlint.rules.shared import RANK_WORKERS_CONSTANT
from loadlint.types import HardwareProfile

_T8 = HardwareProfile(usable_cpus=16, gpu_count=8, declared=frozenset({"cpus", "gpus"}))
_T1 = HardwareProfile(usable_cpus=4, gpu_count=1, declared=frozenset({"cpus", "gpus"}))


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
        """ % "\n        ".join(RANK_WORKERS_CONSTANT),
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
        """ % "\n        ".join(RANK_WORKERS_CONSTANT),
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
