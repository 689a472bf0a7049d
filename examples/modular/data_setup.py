"""Builds the training and evaluation loaders from two image folders."""

import os

from torch.utils.data import DataLoader
from torchvision import datasets

WORKERS = os.cpu_count()


def create_dataloaders(train_dir, test_dir, transform, batch_size, num_workers=WORKERS):
    """Return (train loader, test loader, class names)."""
    train_data = datasets.ImageFolder(train_dir, transform=transform)
    test_data = datasets.ImageFolder(test_dir, transform=transform)
    train_loader = DataLoader(train_data, batch_size=batch_size, shuffle=True, num_workers=num_workers, pin_memory=True)
    test_loader = DataLoader(test_data, batch_size=batch_size, shuffle=False, num_workers=num_workers, pin_memory=True)
    return train_loader, test_loader, train_data.classes
