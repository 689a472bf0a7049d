"""LL103 (worker-rng-duplication): the examples tests/test_rules.py runs."""

from __future__ import annotations

from loadlint.rules.base import Invalid, Valid


VALID = [
    # Workers reseed the global generators.
    Valid("""
        import numpy as np
        from torch.utils.data import DataLoader, Dataset
        class Noisy(Dataset):
            def __getitem__(self, i):
                return np.random.normal()
            def __len__(self):
                return 8
        loader = DataLoader(Noisy(), num_workers=2)
    """),
    Valid("""
        import numpy as np
        from torch.utils.data import DataLoader, Dataset
        class Noisy(Dataset):
            def __init__(self):
                self.rng = np.random.default_rng(0)
            def __getitem__(self, i):
                return self.rng.normal()
        loader = DataLoader(Noisy(), num_workers=2, worker_init_fn=seed_worker)
    """),
    Valid("""
        import numpy as np
        from torch.utils.data import DataLoader, Dataset
        class Noisy(Dataset):
            def __init__(self):
                self.rng = np.random.default_rng(0)
            def __getitem__(self, i):
                return self.rng.normal()
        loader = DataLoader(Noisy(), num_workers=0)
    """),
    # Seeded per worker.
    Valid("""
        import numpy as np
        from torch.utils.data import DataLoader, Dataset, get_worker_info
        class Noisy(Dataset):
            def __init__(self):
                self.rng = np.random.default_rng(0)
            def __getitem__(self, i):
                info = get_worker_info()
                if info is not None:
                    self.rng = np.random.default_rng(info.seed)
                return self.rng.normal()
        loader = DataLoader(Noisy(), num_workers=2)
    """),
]
INVALID = [
    Invalid(
        """
        import numpy as np
        from torch.utils.data import DataLoader, Dataset
        class Noisy(Dataset):
            def __init__(self, data):
                self.data = data
                self.rng = np.random.default_rng(0)
            def __getitem__(self, i):
                return self.data[i] + self.rng.normal()
            def __len__(self):
                return len(self.data)
        loader = DataLoader(Noisy(values), batch_size=4, num_workers=2)
        """,
        message="`Noisy.__getitem__` draws from `self.rng`, created before the workers start: every worker copies "
        "the same generator state and produces the same random numbers; reseed it per worker in a `worker_init_fn`",
        line=11,
    ),
    Invalid(
        """
        import random
        from torch.utils.data import DataLoader, Dataset
        RNG = random.Random(42)
        class Crops(Dataset):
            def __getitem__(self, i):
                return RNG.randint(0, 10)
        def main():
            ds = Crops()
            return DataLoader(ds, num_workers=4)
        """,
    ),
    Invalid(
        """
        import torch
        from torch.utils.data import DataLoader, Dataset
        class Base(Dataset):
            def __init__(self):
                self.gen = torch.Generator()
        class Noise(Base):
            def __getitem__(self, i):
                return torch.rand(3, generator=self.gen)
        loader = DataLoader(Noise(), num_workers=2)
        """,
    ),
]
