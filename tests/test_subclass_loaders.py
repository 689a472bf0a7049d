"""Known DataLoader subclasses (MONAI's, PyG's): loaders for the rules that
read the keywords they forward, never for those that rely on torch's exact
signature; their own positional slots are not read as torch's."""

import textwrap

from loadlint.api import check_source, fix_source
from loadlint.hardware.detect import parse_target, resolve_profile
from loadlint.workspace.config import Settings

PROFILE = resolve_profile(parse_target("cpus=8,gpus=1,memory=64,shm=16,platform=linux,python=3.12"))


def codes(source: str, select: tuple[str, ...] = ("ALL",)) -> list[tuple[int, str]]:
    findings = check_source(textwrap.dedent(source), "train.py", settings=Settings(select=select), profile=PROFILE)
    return [(f.location.row, f.code) for f in findings]


def test_signature_rules_leave_a_subclass_alone():
    # Passing shuffle with a sampler is LL003 on torch's own DataLoader only.
    source = """
        from torch_geometric.loader import DataLoader
        from torch.utils.data import DataLoader as TorchLoader, RandomSampler
        loader = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True, persistent_workers=True)
        torch_loader = TorchLoader(ds, sampler=RandomSampler(ds), shuffle=True)
    """
    assert codes(source, ("LL002", "LL003")) == [(4, "LL002"), (5, "LL003")]


def test_monai_positional_workers_are_not_torch_batch_size():
    # DataLoader(ds, 4) is num_workers=4 in MONAI: unknown, so no LL001 on prefetch_factor.
    source = """
        from monai.data import DataLoader
        a = DataLoader(ds, 4, prefetch_factor=2)
        b = DataLoader(ds, batch_size=4, prefetch_factor=2)
    """
    assert codes(source, ("LL001",)) == [(4, "LL001")]


def test_fix_adds_keywords_to_a_subclass_call():
    source = textwrap.dedent("""
        import torch
        from monai.data import DataLoader
        loader = DataLoader(ds, batch_size=2, num_workers=4)
        model = torch.nn.Linear(2, 2).cuda()
        for epoch in range(3):
            for batch in loader:
                model(batch.to("cuda"))
    """)
    fixed, _ = fix_source(source, "train.py", settings=Settings(select=("LL202", "LL204")), profile=PROFILE)
    assert "loader = DataLoader(ds, batch_size=2, num_workers=4, pin_memory=True, persistent_workers=True)" in fixed


def test_unknown_library_loader_is_not_a_loader():
    source = """
        from torch_geometric.loader import NeighborLoader
        from mylib import DataLoader
        a = NeighborLoader(data, num_neighbors=[10], prefetch_factor=2)
        b = DataLoader(ds, prefetch_factor=2)
    """
    assert codes(source) == []
