"""Train a small image classifier on several GPUs with DistributedDataParallel.

Launch with: torchrun --nproc_per_node=8 examples/train_ddp.py
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

    def __init__(self, root):
        self.files = sorted(os.path.join(root, f) for f in os.listdir(root) if f.endswith(".npy"))

    def __len__(self):
        return len(self.files)

    def __getitem__(self, index):
        image = torch.from_numpy(np.load(self.files[index])).float() / 255.0
        label = index % 10
        return image, label


def main():
    dist.init_process_group(backend="nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)

    model = DDP(nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10)).to(device), device_ids=[local_rank])
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
