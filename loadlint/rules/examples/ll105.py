"""LL105 (cuda-in-worker): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        import torch
        from torch.utils.data import DataLoader, Dataset
        class Images(Dataset):
            def __getitem__(self, i):
                return torch.zeros(3)
        loader = DataLoader(Images(), num_workers=2, pin_memory=True)
        for batch in loader:
            batch = batch.cuda(non_blocking=True)
    """),
    # A GPU-resident dataset without workers is legitimate.
    Valid("""
        import torch
        from torch.utils.data import DataLoader, Dataset
        class OnGpu(Dataset):
            def __getitem__(self, i):
                return torch.ones(3).cuda()
        loader = DataLoader(OnGpu(), num_workers=0)
    """),
    # Asking about CUDA is not using it.
    Valid("""
        import torch
        from torch.utils.data import DataLoader, Dataset
        class Images(Dataset):
            def __getitem__(self, i):
                return torch.zeros(3) if torch.cuda.is_available() else torch.ones(3)
        loader = DataLoader(Images(), num_workers=2)
    """),
    Valid("""
        import torch
        from torch.utils.data import DataLoader, Dataset
        class Images(Dataset):
            def __getitem__(self, i):
                return torch.zeros(3, device="cpu")
        loader = DataLoader(Images(), num_workers=2)
    """),
]
INVALID = [
    Invalid(
        """
        import torch
        from torch.utils.data import DataLoader, Dataset
        class Images(Dataset):
            def __getitem__(self, i):
                return torch.zeros(3).cuda()
            def __len__(self):
                return 8
        loader = DataLoader(Images(), batch_size=4, num_workers=2)
        """,
        message="`Images.__getitem__` uses CUDA inside worker processes: forked workers fail with \"Cannot "
        "re-initialize CUDA in forked subprocess\" and spawned ones each create a CUDA context; load on the CPU "
        "and move batches to the GPU in the training loop",
        line=8,
    ),
    Invalid(
        """
        import torch
        from torch.utils.data import DataLoader, Dataset
        DEVICE = torch.device("cuda")
        class Cached(Dataset):
            def __init__(self, x):
                self.x = x.to(DEVICE)
        loader = DataLoader(Cached(x), num_workers=4)
        """,
    ),
    Invalid(
        """
        import torch
        from torch.utils.data import DataLoader
        def collate(batch):
            return torch.stack(batch).to("cuda")
        loader = DataLoader(ds, num_workers=2, collate_fn=collate)
        """,
        message="`collate_fn` uses CUDA inside worker processes: forked workers fail with \"Cannot re-initialize "
        "CUDA in forked subprocess\" and spawned ones each create a CUDA context; load on the CPU and move "
        "batches to the GPU in the training loop",
    ),
    Invalid(
        """
        import torch
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, collate_fn=lambda b: torch.stack(b).cuda())
        """,
    ),
    Invalid(
        """
        import torch
        from torch.utils.data import DataLoader, Dataset
        class Noise(Dataset):
            def __getitem__(self, i):
                return torch.randn(3, device="cuda")
        loader = DataLoader(Noise(), num_workers=2)
        """,
    ),
]
