"""LL205 (blocking-transfer): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
    """),
    # Not pinned: LL202's business.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2)
        for x in loader:
            x = x.cuda()
    """),
    # Not a CUDA destination.
    Valid("""
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("mps")
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        for x in loader:
            x = x.to(device)
    """),
    # An unknown device stays silent.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        for x in loader:
            x = x.to(args.device)
    """),
    # A CPU tensor type is not a copy to the GPU.
    Valid("""
        import torch
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        for x, y in loader:
            x = x.type(torch.FloatTensor)
            y = y.type(torch.cuda.LongTensor, non_blocking=True)
    """),
    # Not a batch of the loader.
    Valid("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        model.cuda()
        for x in loader:
            model(x)
    """),
]
INVALID = [
    # A CUDA tensor type: the same blocking copy as `.cuda()`.
    Invalid(
        """
        import torch
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        for images, labels in loader:
            images = images.type(torch.cuda.FloatTensor)
            labels = labels.type(dtype="torch.cuda.LongTensor")
        """,
        message="`.type()` of a pinned batch without `non_blocking=True`: the copy blocks and cannot overlap "
        "compute, so pinning buys nothing; pass `non_blocking=True`",
        count=2,
        fixed="""
        import torch
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        for images, labels in loader:
            images = images.type(torch.cuda.FloatTensor, non_blocking=True)
            labels = labels.type(dtype="torch.cuda.LongTensor", non_blocking=True)
        """,
        line=5,
    ),
    # A loader read from a dict by its key.
    Invalid(
        """
        from torch.utils.data import DataLoader
        loaders = {"train": DataLoader(ds, num_workers=2, pin_memory=True)}
        for x, y in loaders["train"]:
            x = x.cuda()
        """,
        fixed="""
        from torch.utils.data import DataLoader
        loaders = {"train": DataLoader(ds, num_workers=2, pin_memory=True)}
        for x, y in loaders["train"]:
            x = x.cuda(non_blocking=True)
        """,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        for x, y in loader:
            x = x.cuda()
        """,
        message="`.cuda()` of a pinned batch without `non_blocking=True`: the copy blocks and cannot overlap "
        "compute, so pinning buys nothing; pass `non_blocking=True`",
        fixed="""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        for x, y in loader:
            x = x.cuda(non_blocking=True)
        """,
        line=4,
    ),
    Invalid(
        """
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        def train(ds):
            loader = DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True)
            for epoch in range(3):
                for i, (images, labels) in enumerate(loader):
                    images = images.to(device)
                    labels = labels.to(device, non_blocking=True)
        """,
        fixed="""
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        def train(ds):
            loader = DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True)
            for epoch in range(3):
                for i, (images, labels) in enumerate(loader):
                    images = images.to(device, non_blocking=True)
                    labels = labels.to(device, non_blocking=True)
        """,
        line=8,
    ),
    Invalid(
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        for batch in loader:
            inputs = batch["x"].to("cuda:0")
            targets = batch["y"].cuda(0)
        """,
        count=2,
        fixed="""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        for batch in loader:
            inputs = batch["x"].to("cuda:0", non_blocking=True)
            targets = batch["y"].cuda(0, non_blocking=True)
        """,
    ),
]
