"""LL101 only where ranks really duplicate work: silent for a loader one
process reads and for the tail a sampler dropped, reported as soon as any
use escapes the rank-0 block or the condition holds on many processes; an
LL101 without a fix always says why."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from loadlint.api import check_source

REPO = Path(__file__).resolve().parents[2]
HEAD = """\
import os
import torch.distributed as dist
from torch.utils.data import DataLoader, Subset
"""


def ll101(body: str) -> list[tuple[int, str | None]]:
    source = HEAD + textwrap.dedent(body)
    return [(f.location.row, f.fix_withheld) for f in check_source(source, "m.py", select=["LL101"])]


SILENT = {
    "rank == 0 around the loop": """
        def main(args):
            dist.init_process_group("nccl")
            loader = DataLoader(ds)
            if args.rank == 0:
                for batch in loader:
                    step(batch)
    """,
    "0 == dist.get_rank()": """
        def main():
            dist.init_process_group("nccl")
            loader = DataLoader(ds)
            if 0 == dist.get_rank():
                evaluate(loader)
    """,
    "not rank": """
        def main(rank):
            dist.init_process_group("nccl")
            loader = DataLoader(ds)
            if not rank:
                evaluate(loader)
    """,
    "environment rank and a condition beside it": """
        def main(args):
            dist.init_process_group("nccl")
            loader = DataLoader(ds)
            if args.eval and int(os.environ["RANK"]) == 0:
                evaluate(loader)
    """,
    "is_main_process()": """
        def main():
            dist.init_process_group("nccl")
            loader = DataLoader(ds)
            if is_main_process():
                evaluate(loader)
    """,
    "at module level": """
        dist.init_process_group("nccl")
        loader = DataLoader(ds)
        if dist.get_rank() == 0:
            evaluate(loader)
    """,
    "the dropped tail, through a name": """
        def validate(loader, world_size):
            dist.init_process_group("nccl")
            tail = range(len(loader.sampler) * world_size, len(loader.dataset))
            aux = DataLoader(Subset(loader.dataset, tail))
            run(aux)
    """,
    "assert not multi_gpu in the branch (wav2vec2's transcription)": """
        def main(args):
            multi_gpu = int(os.environ.get("WORLD_SIZE", 1)) > 1
            if args.transcribe:
                assert not multi_gpu, "transcription runs on one GPU"
                loader = DataLoader(ds)
            run(loader)
    """,
    "assert world_size == 1 before the branch": """
        def main(world_size):
            dist.init_process_group("nccl")
            assert world_size == 1
            if True:
                loader = DataLoader(ds)
            run(loader)
    """,
    "an index tensor split per rank (PyG's Quiver)": """
        def run(rank, world_size, data):
            dist.init_process_group("nccl", rank=rank, world_size=world_size)
            idx = data.train_mask.nonzero(as_tuple=False).view(-1)
            idx = idx.split(idx.size(0) // world_size)[rank]
            loader = DataLoader(idx, batch_size=1024, shuffle=True)
            step(loader)
    """,
    "every world_size-th index from the rank": """
        def run(rank, world_size, idx):
            dist.init_process_group("nccl")
            loader = DataLoader(idx[rank::world_size])
            step(loader)
    """,
}


@pytest.mark.parametrize("case", sorted(SILENT))
def test_silent_where_no_rank_repeats_work(case):
    assert ll101(SILENT[case]) == []


REPORTED = {
    "used outside the block too": """
        def main(args):
            dist.init_process_group("nccl")
            loader = DataLoader(ds)
            if args.rank == 0:
                evaluate(loader)
            return loader
    """,
    "the other branch": """
        def main(args):
            dist.init_process_group("nccl")
            loader = DataLoader(ds)
            if args.rank == 0:
                pass
            else:
                evaluate(loader)
    """,
    "rank != 0": """
        def main(args):
            dist.init_process_group("nccl")
            loader = DataLoader(ds)
            if args.rank != 0:
                evaluate(loader)
    """,
    "rank == 1 holds on one process, but the loader is not rank 0's": """
        def main(args):
            dist.init_process_group("nccl")
            loader = DataLoader(ds)
            if args.rank == 1 or args.debug:
                evaluate(loader)
    """,
    "rank == 0 or a condition true on every rank": """
        def main(args):
            dist.init_process_group("nccl")
            loader = DataLoader(ds)
            if args.rank == 0 or args.verbose:
                evaluate(loader)
    """,
    "group_rank": """
        def main(args):
            dist.init_process_group("nccl")
            loader = DataLoader(ds)
            if args.group_rank == 0:
                evaluate(loader)
    """,
    "never used": """
        def main(args):
            dist.init_process_group("nccl")
            loader = DataLoader(ds)
    """,
    "a subset that is not the dropped tail": """
        def main(args):
            dist.init_process_group("nccl")
            loader = DataLoader(Subset(ds, range(0, len(ds) // 2)))
            run(loader)
    """,
    "an assert after the loader": """
        def main(args, multi_gpu):
            dist.init_process_group("nccl")
            loader = DataLoader(ds)
            assert not multi_gpu
            run(loader)
    """,
    "an assert in another branch": """
        def main(args, multi_gpu):
            if args.a: assert not multi_gpu
            loader = DataLoader(ds)
            dist.init_process_group("nccl")
            run(loader)
    """,
    "assert not no_ddp": """
        def main(args, no_ddp):
            assert not no_ddp
            loader = DataLoader(ds)
            dist.init_process_group("nccl")
            run(loader)
    """,
    "an index tensor split but not by rank": """
        def run(rank, idx):
            idx = idx.split(1024)[0]
            loader = DataLoader(idx)
            dist.init_process_group("nccl")
            step(loader)
    """,
}


@pytest.mark.parametrize("case", sorted(REPORTED))
def test_reported_where_ranks_duplicate_work(case):
    found = ll101(REPORTED[case])
    assert [row for row, _ in found] == [7]


BUILT = (
    "no fix: the dataset is built in the call, and the sampler needs the same object; bind it to a name "
    "(`val_dataset = ...`) and pass `sampler=DistributedSampler(val_dataset, shuffle=False)`; for an "
    "evaluation, all-reduce the metrics, or evaluate on rank 0 alone"
)
UNPACKED = (
    "no fix: the dataset comes through `**` arguments; add `sampler=DistributedSampler(<the dataset>, "
    "shuffle=False)` where they are made; for an evaluation, all-reduce the metrics, or evaluate on rank 0 alone"
)


@pytest.mark.parametrize("call, why", [
    ("DataLoader(ImageFolder(valdir), batch_size=8)", BUILT),
    ("DataLoader(**{'dataset': ds, 'batch_size': 8})", UNPACKED),
])
def test_every_ll101_without_a_fix_says_why(call, why):
    assert ll101(f"""
        def main(args):
            dist.init_process_group("nccl")
            loader = {call}
            run(loader)
    """) == [(7, why)]


def test_imagenet_and_moco_shapes():
    # tests/fixtures/checker/imagenet_ranks.py: the train loader has its
    # sampler, the tail and the rank-0 loaders are silent, moco's validation
    # loader is reported with its reason.
    source = (REPO / "tests/fixtures/checker/imagenet_ranks.py").read_text(encoding="utf-8")
    found = [(f.location.row, f.fix_withheld) for f in check_source(source, "main.py", select=["LL101"])]
    assert found == [(33, BUILT)]


def test_test_modules_reading_rank_are_not_distributed():
    """composer's fixtures: ``RANK`` names an asset folder in a module that
    imports pytest; the same read in a script is still evidence."""
    body = """
        import os
        import pytest
        from torch.utils.data import DataLoader

        def assets_path():
            rank = os.environ.get('RANK', '0')
            return 'tokenizers' + (f'_{rank}' if rank != '0' else '')

        @pytest.fixture
        def state():
            return State(dataloader=DataLoader(RandomClassificationDataset()))
    """
    source = textwrap.dedent(body)
    assert check_source(source, "fixtures.py", select=["LL101"]) == []
    script = source.replace("import pytest\n", "").replace("@pytest.fixture\n", "")
    assert [f.location.row for f in check_source(script, "fixtures.py", select=["LL101"])] == [10]
