"""A small TorchTPU-style training script: device "tpu", torch.compile(backend="tpu").

Run it with `tpuport run examples/tpu/train_mlp.py` (on a TPU VM it runs on the TPU; elsewhere on
the sim target, which maps the "tpu" device onto this machine). Batches come in two sizes, padded
to buckets, so the run shows exactly two compiles; the step lines and summary show the step time,
compiles and host syncs.
"""
import argparse

import torch
from torch import nn

try:  # optional: step markers and samples/s when run under tpuport
    import tpuport
except ImportError:
    tpuport = None

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--device", default="tpu")
args = parser.parse_args()

torch.manual_seed(0)
device = torch.device(args.device)
model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 10)).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
compiled = torch.compile(model, backend="tpu", dynamic=False)
target = torch.randn(10, 64, device=device)

for step in range(args.steps):
    batch = 32 if step % 3 else 64  # two shapes: two compiles, then cache hits
    x = torch.randn(batch, 64, device=device)
    y = (x @ target.T).argmax(dim=1)
    loss = nn.functional.cross_entropy(compiled(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if tpuport is not None:
        tpuport.report(samples=batch)
    opt.step()
    if step % 10 == 0:
        print(f"step {step:3d} loss {loss.item():.4f}")
