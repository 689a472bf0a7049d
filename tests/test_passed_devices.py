"""Devices and batches as real scripts pass them: the parts a loop binds
from its batch (``images, masks = batch["image"], batch["mask"]``) are the
batch for the transfer rules, and a CUDA device passed as ``device=`` to a
call is CUDA evidence for the module (ignite's DCGAN)."""

import textwrap

from loadlint.api import check_source
from loadlint.hardware.detect import parse_target, resolve_profile
from loadlint.workspace.config import Settings

PROFILE = resolve_profile(parse_target("cpus=8,gpus=1,memory=64,shm=16,platform=linux,python=3.12"))


def findings(source: str, select: tuple[str, ...]) -> list[str]:
    found = check_source(textwrap.dedent(source), "train.py", settings=Settings(select=select), profile=PROFILE)
    return [f"{f.location.row}:{f.location.column} {f.code} {f.message}" for f in found]


BLOCKING = (
    "LL205 `.to()` of a pinned batch without `non_blocking=True`: the copy blocks and cannot overlap compute, "
    "so pinning buys nothing; pass `non_blocking=True`"
)


def test_parts_of_a_batch_are_moved_with_it():
    source = """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=True, persistent_workers=True)
        for epoch in range(3):
            for batch in loader:
                images, masks = batch["image"], batch["mask"]
                labels = batch.labels
                images = images.to(device="cuda", dtype=torch.float32)
                masks = masks.to("cuda")
                labels = labels.to("cuda")
                out = model(images)
                out.to("cuda")
    """
    assert findings(source, ("LL205",)) == [f"8:18 {BLOCKING}", f"9:17 {BLOCKING}", f"10:18 {BLOCKING}"]


def test_a_name_computed_from_the_batch_is_not_a_part():
    # A call's result (the model's output, a sum) is not the batch.
    source = """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=True, persistent_workers=True)
        for batch in loader:
            out = model(batch)
            total, count = batch.sum(), len(batch)
            out.to("cuda")
            total.to("cuda")
    """
    assert findings(source, ("LL205",)) == []


def test_a_part_outside_the_loop_is_not_a_part():
    source = """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=True, persistent_workers=True)
        for batch in loader:
            pass
        images = batch["image"]
        images.to("cuda")
    """
    assert findings(source, ("LL205",)) == []


DCGAN = """
    import torch
    from torch.utils import data

    def main(dataset, device):
        loader = data.DataLoader(dataset, batch_size=64, num_workers=2, persistent_workers=True)
        for real, _ in loader:
            real = real.to(device)

    if __name__ == "__main__":
        dev = {device}
        main(dataset=ds, device=dev)
"""
PIN = (
    "LL202 `pin_memory` is not set but batches go to the GPU: copies from pageable memory block and cannot "
    "overlap compute; set `pin_memory=True`"
)


def test_a_cuda_device_passed_as_device_is_cuda_evidence():
    source = DCGAN.format(device='"cpu" if not torch.cuda.is_available() else "cuda:0"')
    assert findings(source, ("LL202",)) == [f"6:14 {PIN}"]


def test_a_cpu_or_unknown_device_passed_is_no_evidence():
    for device in ('"cpu"', "pick_device()", 'os.environ["DEVICE"]'):
        assert findings(DCGAN.format(device=device), ("LL202",)) == [], device
