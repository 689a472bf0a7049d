"""LL202's silences hold only where the batches really are on the GPU
already or never reach it: a loader peeked at and also used elsewhere, an
index dataset rebound, a loop that sends batches both ways, a CPU
``device=`` in the dataset, all stay reported.  Also LL205 on
``.type(torch.cuda.*Tensor)`` and LL106's rank terms."""

from __future__ import annotations

import textwrap

import pytest

from loadlint.api import check_source

HEAD = """\
import time
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler
device = torch.device("cuda")
"""


def rows(code: str, body: str) -> list[int]:
    source = HEAD + textwrap.dedent(body)
    return [f.location.row for f in check_source(source, "m.py", select=[code])]


REPORTED = {
    "peeked, then iterated": """
        loader = DataLoader(ds, batch_size=4)
        print(next(iter(loader)).shape)
        for x in loader:
            x = x.to(device)
    """,
    "peeked, then passed on": """
        loader = DataLoader(ds, batch_size=4)
        print(next(iter(loader)).shape)
        train(model, loader)
    """,
    "peeked, then returned": """
        def make(ds):
            loader = DataLoader(ds, batch_size=4)
            sample = next(iter(loader))
            return loader
    """,
    "an index dataset name bound twice": """
        idx = torch.arange(10)
        idx = load_rows()
        loader = DataLoader(idx, batch_size=4)
        for x in loader:
            x = x.to(device)
    """,
    "batches sent both ways": """
        for x in DataLoader(ds, batch_size=4):
            y = model(x.cuda())
            out.append(y.cpu())
    """,
    "batches sent to the host and to an unknown device": """
        for x in DataLoader(ds, batch_size=4):
            log(x.cpu())
            model(x.to(args.device))
    """,
    "a CPU device in the dataset's construction": """
        ds = Transformed(files, transform=Resize(device="cpu"))
        loader = DataLoader(ds, batch_size=4)
        for x in loader:
            x = x.to(device)
    """,
    "a TensorDataset of CPU tensors": """
        inputs = torch.from_numpy(x).half()
        loader = DataLoader(TensorDataset(inputs), batch_size=4)
        for (x,) in loader:
            x = x.to(device)
    """,
    "a collate_fn that stays on the CPU": """
        def collate(samples):
            return torch.stack(samples)
        loader = DataLoader(ds, batch_size=4, collate_fn=collate)
        for x in loader:
            x = x.to(device)
    """,
    "pin_memory=False and no other loader pins": """
        val = DataLoader(val_ds, batch_size=4, pin_memory=False)
        for x in val:
            x = x.to(device)
    """,
    "a list of numbers as the dataset": """
        loader = DataLoader([1.0, 2.0], batch_size=2)
        for x in loader:
            x = x.to(device)
    """,
}


#: The CIFAR-10 tutorial: the test loader's batches reach a CPU model.
_CPU_TEST = """
    class Net(torch.nn.Module):
        def forward(self, x):
            return x
    train = DataLoader(ds, batch_size=4, pin_memory=True)
    for x, y in train:
        x, y = x.to(device), y.to(device)
    net = Net()
    test = DataLoader(ds, batch_size=4)
    dataiter = iter(test)
    images, labels = next(dataiter)
    for data in test:
        images, labels = data
        outputs = {model}(images)
        _, predicted = torch.max(outputs.data, 1)
        total += labels.size(0)
        print((predicted == labels).sum().item())
    del dataiter
"""
REPORTED |= {
    "batches handed to an imported helper": _CPU_TEST.replace("{model}(images)", "step(images)"),
    "a model of an imported class": _CPU_TEST.replace("{model}(images)", "torch.nn.DataParallel(net)(images)"),
    "a model that moves its input": _CPU_TEST.replace("return x", "return x.cuda()").replace("{model}", "net"),
    "the iterator read in a loop": _CPU_TEST.replace("{model}", "net").replace(
        "images, labels = next(dataiter)", "while True:\n        images, labels = next(dataiter)"
    ),
}


@pytest.mark.parametrize("body", REPORTED.values(), ids=REPORTED.keys())
def test_ll202_still_reported(body: str) -> None:
    assert len(rows("LL202", body)) == 1


SILENT = {
    "first() in a function": """
        from monai.utils import first
        def show(ds):
            loader = DataLoader(ds, batch_size=2)
            print(first(loader)["img"].shape)
    """,
    "next(iter()) timed in a loop at module level": """
        loader = DataLoader(ds, batch_size=64, num_workers=8)
        for _ in range(10):
            start = time.time()
            next(iter(loader))
            print(time.time() - start)
    """,
    "torch.where(mask)[0]": """
        idx = torch.where(mask)[0]
        for i in DataLoader(idx, batch_size=1024):
            rows = x[i].to(device)
    """,
    "to the host, with tqdm": """
        from tqdm import tqdm
        loader = DataLoader(ds, batch_size=512)
        for a, b in tqdm(loader):
            f.write(a.to(torch.float16).cpu().numpy().tobytes())
    """,
    "a lambda collate that moves to CUDA": """
        loader = DataLoader(ds, batch_size=4, collate_fn=lambda b: torch.stack(b).to("cuda"))
        for x in loader:
            model(x)
    """,
    "a dataset of tensors made on CUDA": """
        loader = DataLoader(TensorDataset(torch.rand(100, 3, device="cuda")), batch_size=4)
        for (x,) in loader:
            model(x)
    """,
}


SILENT["the batches reach a CPU model of the module (the CIFAR-10 tutorial's test loop)"] = _CPU_TEST.replace(
    "{model}", "net"
)


@pytest.mark.parametrize("body", SILENT.values(), ids=SILENT.keys())
def test_ll202_silent(body: str) -> None:
    assert rows("LL202", body) == []


def test_ll205_cuda_tensor_types() -> None:
    body = """
        loader = DataLoader(ds, batch_size=4, pin_memory=True)
        for x, y, z in loader:
            x = x.type(torch.cuda.HalfTensor)
            y = y.type(torch.FloatTensor)
            z = z.type("torch.cuda.FloatTensor", non_blocking=True)
    """
    assert rows("LL205", body) == [9]


SEEDS = {
    "args.seed + args.local_rank": 1,
    "args.seed + int(os.environ.get('RANK', 0))": 1,
    "args.seed + xm.get_ordinal()": 1,
    "args.seed + accelerator.process_index": 1,
    "trainer.global_rank": 1,
    "args.seed": 0,
    "args.seed + args.node_rank": 0,
    "args.seed + args.world_size": 0,
    "args.seed + epoch": 0,
}


@pytest.mark.parametrize("seed", SEEDS, ids=SEEDS.keys())
def test_ll106_rank_terms(seed: str) -> None:
    body = f"""
        import os
        sampler = DistributedSampler(ds, seed={seed})
        loader = DataLoader(ds, sampler=sampler)
    """
    assert len(rows("LL106", body)) == SEEDS[seed]


def test_ll202_notebook_cells_rebuilding_a_peeked_loader() -> None:
    # Each cell rebuilds `loader` and reads one batch (MONAI's transform_speed notebook).
    peeks = """
        from monai.utils import first
        loader = DataLoader(ds, batch_size=3, num_workers=8)
        im, seg = first(loader)
        loader = DataLoader(ds2, batch_size=3, num_workers=0)
        im, seg = first(loader)
    """
    assert rows("LL202", peeks) == []
    # One of the bindings is not a loader: what the reads see is unknown.
    mixed = """
        from monai.utils import first
        loader = DataLoader(ds, batch_size=3, num_workers=8)
        im, seg = first(loader)
        loader = wrap(loader)
        im, seg = first(loader)
    """
    assert rows("LL202", mixed) == [8]


def test_ll202_index_tensor_split_per_rank() -> None:
    # PyG's multi-GPU Quiver example: the index tensor rebound to this rank's part.
    split = """
        def run(rank, world_size, data):
            train_idx = data.train_mask.nonzero(as_tuple=False).view(-1)
            train_idx = train_idx.split(train_idx.size(0) // world_size)[rank]
            loader = DataLoader(train_idx, batch_size=1024, shuffle=True)
            for idx in loader:
                model(x[idx].to(device))
    """
    assert rows("LL202", split) == []
    # Rebound to something that is not derived from the indices.
    rebound = """
        def run(rank, data):
            train_idx = data.train_mask.nonzero(as_tuple=False).view(-1)
            train_idx = load_rows(rank)
            loader = DataLoader(train_idx, batch_size=1024, shuffle=True)
            for idx in loader:
                model(idx.to(device))
    """
    assert rows("LL202", rebound) == [10]
