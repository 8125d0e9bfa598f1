"""A CUDA training script that cannot run on a TPU as it is: it defines a Triton kernel, so the
migration leaves its devices alone and the port still asks for CUDA (tests/integration/check.rs)."""
import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) * 2, mask=i < n)


def main():
    device = "cuda"
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(32, 8, device=device)
        y = torch.randn(32, 1, device=device)
        loss = (model(x) - y).abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
