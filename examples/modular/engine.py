"""One training step, one evaluation step, and the epoch loop."""

import torch


def train_step(model, loader, loss_fn, optimizer, device):
    model.train()
    total = 0.0
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        loss = loss_fn(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(loader)


def test_step(model, loader, loss_fn, device):
    model.eval()
    total = 0.0
    with torch.inference_mode():
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            total += loss_fn(model(images), labels).item()
    return total / len(loader)


def train(model, train_loader, test_loader, loss_fn, optimizer, epochs, device):
    history = []
    for epoch in range(epochs):
        train_loss = train_step(model, train_loader, loss_fn, optimizer, device)
        test_loss = test_step(model, test_loader, loss_fn, device)
        history.append((epoch, train_loss, test_loss))
    return history
