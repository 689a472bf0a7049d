"""The fixed DataLoader constructions run with real torch.

``examples/train_ddp.py`` (and the golden outputs) are fixed with every fix,
then each DataLoader call in the result is evaluated as written, on a tiny
in-memory dataset, inside a one-process gloo group (DistributedSampler needs
one): it must construct and yield a batch.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import libcst as cst
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: fixed loaders cannot be run")

from loadlint.engine.decision import fix_text  # noqa: E402

from loadlint.types import Options
from loadlint.sources.source import decode  # noqa: E402
from loadlint.types import HardwareProfile  # noqa: E402

pytestmark = pytest.mark.torch

ROOT = Path(__file__).parents[1]
PROFILE = HardwareProfile(
    usable_cpus=4, gpu_count=1, platform="linux", python="3.11",
    declared=frozenset({"cpus", "gpus", "platform", "python"}),
)
CODES = frozenset({"LL101", "LL201", "LL202", "LL203"})


class Tiny(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int):
        return torch.full((3,), float(index)), index % 2


def loader_calls(text: str) -> list[str]:
    module = cst.parse_module(text)
    found: list[str] = []

    class Visitor(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
            if name == "DataLoader":
                found.append(module.code_for_node(node))

    module.visit(Visitor())
    return found


@pytest.fixture(scope="module")
def process_group(tmp_path_factory):
    import torch.distributed as dist

    store = tmp_path_factory.mktemp("pg") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def sources() -> list[Path]:
    # LL013's guard fixtures are scripts run as __main__ under spawn and
    # forkserver: tests/test_main_guard_fix.py runs them that way.
    fixtures = sorted(p for p in (ROOT / "tests" / "fixtures" / "fix").glob("*.in.py") if not p.name.startswith("ll013_"))
    return [ROOT / "examples" / "train_ddp.py", *fixtures]


@pytest.mark.parametrize("path", sources(), ids=lambda p: p.name)
def test_fixed_loaders_yield_a_batch(path: Path, process_group, monkeypatch) -> None:
    from torch.utils.data import DataLoader, DistributedSampler

    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    text = decode(path.read_bytes()).text
    fixed, _, applied = fix_text(text, path.name, Options(CODES, lambda: PROFILE), unsafe=True)
    assert applied
    calls = loader_calls(fixed)
    assert calls
    for code in calls:
        namespace = {
            "DataLoader": DataLoader,
            "DistributedSampler": DistributedSampler,
            "torch": torch,
            "os": os,
            "multiprocessing": __import__("multiprocessing"),
            "dataset": Tiny(), "train_set": Tiny(), "val_set": Tiny(), "test_set": Tiny(),
            "images": Tiny(), "masks": Tiny(),  # loaders alive together (they share the CPUs)
            "BATCH_SIZE": 4, "BATCH": 4, "sampler": None, "train_sampler": None, "valid_sampler": None,
            # The tutorial and replay-buffer shapes: their datasets stand in as Tiny.
            "training_data": Tiny(), "test_data": Tiny(), "batch_size": 4,
            "buffer": None, "RLDataset": lambda buffer, size: Tiny(),
        }
        # The run-time worker count a fix defines after the imports (its CPUs, then its workers).
        exec("\n".join(line for line in fixed.splitlines() if line.startswith(("LOADER_CPUS =", "LOADER_WORKERS ="))), namespace)
        namespace["WORKERS"] = eval(  # the module-level value LL203 rewrote, as fixed
            next((line.split("=", 1)[1] for line in fixed.splitlines() if line.startswith("WORKERS =")), "1"),
            namespace,
        )
        # The command line as fixed: the file's parser run without options.
        cli = [line for line in fixed.splitlines() if line.startswith(("import argparse", "parser", "args = parser"))]
        if cli:
            monkeypatch.setattr(sys, "argv", [path.name])
            exec("\n".join(cli), namespace)
        loader = eval(code, namespace)
        images, labels = next(iter(loader))
        assert images.shape[-1] == 3 and len(labels) >= 1
        if loader.num_workers:
            assert loader.num_workers <= PROFILE.usable_cpus
        del loader
