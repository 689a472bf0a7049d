"""A single-process training loop whose Dataset decodes each sample on the fly.

`loadlint check examples/` flags the loader; `loadlint verify
examples/train_cpu.py` measures whether the suggested settings are faster.
"""

import time

import torch
from torch.utils.data import DataLoader, Dataset


class DecodedImages(Dataset):
    """Stands in for JPEG decoding: about 2 ms of waiting per sample."""

    def __init__(self, size=512):
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        time.sleep(0.002)
        return torch.full((3, 32, 32), float(index % 255)), index % 10


def main():
    loader = DataLoader(DecodedImages(), batch_size=32, shuffle=True)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(3):
        for images, labels in loader:
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
