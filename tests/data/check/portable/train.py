"""A script written for "the current accelerator" (torch.accelerator) that still times and
measures its steps with CUDA's calls. `tpuport migrate` makes those portable
(`torch.accelerator.synchronize`, `torch.accelerator.max_memory_allocated`), so the port must do
on the CUDA machine exactly what the original does: the same losses bit for bit, the same output
but for its timings (tests/integration/check.rs)."""
import time

import torch
from torch import nn


def main():
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    device = accelerator.type if accelerator is not None else "cpu"
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 1)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    print(f"training on {device}")
    for step in range(6):
        t0 = time.perf_counter()
        x = torch.randn(64, 32).to(device)
        y = x[:, :4].sum(1, keepdim=True)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        mem = torch.cuda.max_memory_allocated() / 2**20
        print(f"step {step}: loss {loss.item():.6f}, {dt * 1000:.3f} ms, max memory {mem:.1f} MiB")


if __name__ == "__main__":
    main()
