"""A small CUDA training script for benchmarks/gpu_check.sh: a CPU-bound
dataset of image-sized tensors (a stand-in for decoding and augmenting),
a small convolutional model on the GPU, and a loop that copies each batch
with ``non_blocking=True``. With ``num_workers=0`` the GPU waits for every
batch (a sawtooth of utilisation); with enough workers it stays busy.

    python benchmarks/gpu_train.py [--items 2048] [--rounds 20] [--epochs 2]
"""

import argparse
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


@dataclass
class Augmented(Dataset):
    """Images built and augmented on the CPU: ``rounds`` blur passes stand
    in for decoding, a millisecond or so per image."""

    n: int
    rounds: int

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        image = torch.rand(3, 64, 64, generator=torch.Generator().manual_seed(i))
        for _ in range(self.rounds):
            image = (image + image.roll(1, 1) + image.roll(1, 2)) / 3
        return image, i % 10


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    device = torch.device("cuda")
    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Augmented(args.items, args.rounds), batch_size=32, shuffle=True)
    for _ in range(args.epochs):
        for x, y in loader:
            x = x.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(float(loss))


if __name__ == "__main__":
    main()
