# expect: PERF002 DYN006 DEV001 CUD001
"""A training loop that logs with .item() on every step, and one that logs periodically."""
import torch
from torch.utils.data import DataLoader

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def train(model, dataset, steps=100):
    loader = DataLoader(dataset, batch_size=32, shuffle=True)
    opt = torch.optim.Adam(model.parameters())
    history = []
    running = torch.zeros((), device=device)
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append(loss.item())
        running += loss.detach()
        if step % 50 == 0:
            print(f"step {step}: mean loss {(running / 50).item():.4f}")
            running.zero_()
    return history
