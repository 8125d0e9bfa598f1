"""A CUDA training script with a robust loss built on torch.median, an op TorchTPU 0.2.0 lacks:
it ports, but a TPU raises at that op (tests/integration/check.rs)."""
import torch
from torch import nn


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(32, 8, device=device)
        y = torch.randn(32, 1, device=device)
        err = (model(x) - y).abs()
        loss = (err - err.median()).abs().mean()  # median absolute deviation
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
