"""A loader whose items wait 3 ms on storage (a network or disk read), the
``io-wait`` loader of verify_realistic.py as a script of its own: README's
``loadlint verify`` example.  4,096 items in batches of 16, no data files."""

import time

import torch
from torch.utils.data import DataLoader, Dataset


class Remote(Dataset):
    """Each item waits on storage."""

    def __len__(self):
        return 4096

    def __getitem__(self, i):
        time.sleep(0.003)
        return torch.full((64,), float(i))


if __name__ == "__main__":
    loader = DataLoader(Remote(), batch_size=16, shuffle=True)
    for batch in loader:
        pass
