"""A host-bound training loop (bench/emulation_speed.sh): 60 small Linear+LayerNorm+GELU blocks at
batch 4, AdamW. Each step is hundreds of tiny ops, so the host's Python time is the step: the
regime of a TPU's async dispatch, where what an emulating target adds per op shows in full.

    python host_bound.py --device cpu --steps 60
"""
import argparse

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--device", default="tpu")
p.add_argument("--steps", type=int, default=60)
p.add_argument("--blocks", type=int, default=60)
p.add_argument("--width", type=int, default=64)
p.add_argument("--batch", type=int, default=4)
a = p.parse_args()

torch.manual_seed(0)
device = torch.device(a.device)
model = nn.Sequential(*[nn.Sequential(nn.Linear(a.width, a.width), nn.LayerNorm(a.width), nn.GELU())
                        for _ in range(a.blocks)]).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(a.batch, a.width).to(device)
for step in range(a.steps):
    loss = model(x).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if step % 20 == 0 or step == a.steps - 1:
        print("step %d loss %.5f" % (step, loss.item()), flush=True)
