"""LL210 (xla-without-device-loader): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        import torch_xla.core.xla_model as xm
        import torch_xla.distributed.parallel_loader as pl
        from torch.utils.data import DataLoader
        device = xm.xla_device()
        loader = DataLoader(ds, batch_size=8, num_workers=2)
        for x, y in pl.MpDeviceLoader(loader, device):
            step(x, y)
    """),
    Valid("""
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda")
        loader = DataLoader(ds, batch_size=8, num_workers=2)
        for x in loader:
            x = x.to(device)
    """),
]
INVALID = [
    Invalid(
        """
        import torch_xla.core.xla_model as xm
        from torch.utils.data import DataLoader
        device = xm.xla_device()
        loader = DataLoader(ds, batch_size=8, num_workers=2)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
        """,
        message="batches of this loader are moved to the XLA device one by one: the upload cannot overlap "
        "compute; iterate `torch_xla.distributed.parallel_loader.MpDeviceLoader(loader, device)` instead",
        line=4,
    ),
    Invalid(
        """
        import torch_xla
        from torch.utils.data import DataLoader
        def train(ds):
            device = torch_xla.device()
            loader = DataLoader(ds, batch_size=8)
            for epoch in range(2):
                for batch in loader:
                    batch = batch.to(device)
        """,
    ),
]
