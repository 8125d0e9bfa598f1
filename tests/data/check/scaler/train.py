"""A float16 autocast with CUDA's loss scaler, on the GPU named by its index (`LOCAL_RANK`), as
torchrun scripts do. `tpuport migrate --to tpu` (this folder's tpuport.toml: the literal port)
rewrites the scaler to `torch.amp.GradScaler("tpu",
enabled=False)` (AMP003: right on a TPU, which has no float16 scaler) and leaves the rest, so on
the CUDA machine the port trains without its scaler: the scaler's first scale (65536) overflows
the float16 gradients, so the original skips that step and the port does not. The "original
machine" section of `tpuport check` must catch it (tests/integration/check.rs)."""
import os

import torch
from torch import nn


def main():
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(local_rank)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.cuda.amp.GradScaler()
    for step in range(8):
        x = torch.randn(64, 32).to(local_rank)
        y = x[:, :4].sum(1, keepdim=True) * 3
        with torch.autocast("cuda", dtype=torch.float16):
            loss = nn.functional.mse_loss(model(x).float(), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
