"""Train a small image classifier on several GPUs with DistributedDataParallel.

Launch with: torchrun --nproc_per_node=8 examples/train_ddp.py
Without GPUs it runs on the CPU (gloo); without data/train and data/val it
decodes synthetic images of the same shape.
"""

import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset

EPOCHS = 20
BATCH_SIZE = 64


class ImageFolderDataset(Dataset):
    """Decodes one .npy image per sample from a folder (map-style)."""

    def __init__(self, root, synthetic=512):
        found = os.listdir(root) if os.path.isdir(root) else []
        self.files = sorted(os.path.join(root, f) for f in found if f.endswith(".npy"))
        self.synthetic = 0 if self.files else synthetic

    def __len__(self):
        return len(self.files) or self.synthetic

    def __getitem__(self, index):
        if self.files:
            pixels = np.load(self.files[index])
        else:
            pixels = np.frombuffer(os.urandom(3 * 32 * 32), dtype=np.uint8).reshape(3, 32, 32)
        image = torch.from_numpy(pixels.copy()).float() / 255.0
        label = index % 10
        return image, label


def main():
    gpus = torch.cuda.is_available()
    dist.init_process_group(backend="nccl" if gpus else "gloo")
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if gpus:
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if gpus else torch.device("cpu")

    model = DDP(nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10)).to(device), device_ids=[local_rank] if gpus else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    train_set = ImageFolderDataset("data/train")
    val_set = ImageFolderDataset("data/val")
    train_loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=BATCH_SIZE, num_workers=os.cpu_count())

    for epoch in range(EPOCHS):
        model.train()
        for images, labels in train_loader:
            images, labels = images.to(device), labels.to(device)
            loss = nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        model.eval()
        with torch.no_grad():
            for images, labels in val_loader:
                model(images.to(device))

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
