"""Trains a small classifier: `python train.py`."""

import torch

import data_setup
import engine

device = "cuda" if torch.cuda.is_available() else "cpu"
transform = None  # the course resizes to 64x64; the synthetic images already are

train_loader, test_loader, classes = data_setup.create_dataloaders(
    train_dir="data/train", test_dir="data/test", transform=transform, batch_size=32
)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 64 * 64, len(classes))).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
engine.train(model, train_loader, test_loader, torch.nn.CrossEntropyLoss(), optimizer, epochs=5, device=device)
