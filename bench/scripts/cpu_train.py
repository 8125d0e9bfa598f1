"""A CPU training loop for the run-overhead benchmark: it times its own steps.

Writes {"steps": [seconds, ...]} to $BENCH_OUT, so the same numbers are compared whether it runs
under plain Python or under `tpuport run`.
"""
import json
import os
import time

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(128, 256)
y = torch.randint(0, 10, (128,))
times = []
for step in range(int(os.environ.get("BENCH_STEPS", "200"))):
    t0 = time.perf_counter()
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if step % 10 == 0:
        loss.item()
    times.append(time.perf_counter() - t0)
if os.environ.get("BENCH_OUT"):
    with open(os.environ["BENCH_OUT"], "w") as f:
        json.dump({"steps": times}, f)
