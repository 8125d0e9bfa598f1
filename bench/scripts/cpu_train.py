"""A CPU training loop for the run-overhead benchmark: it times its own steps.

Writes {"steps": [seconds, ...], "blocks": [[seconds, ...], ...]} to $BENCH_OUT, so the same
numbers are compared whether it runs under plain Python or under `tpuport run`.

With BENCH_BATON="IN:OUT:READY" (three FIFOs) it takes turns with a second copy of itself: after
its warm-up steps it writes a byte to READY, then for each block of steps it waits for a byte on IN,
runs the block, and writes a byte to OUT. Two copies (one under python, one under tpuport) joined
IN-to-OUT never run at the same time, and each block of one sits next to a block of the other in
time, so the machine's drift (other tenants, clock changes) hits both alike.
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
step_no = 0


def step():
    global step_no
    t0 = time.perf_counter()
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if step_no % 10 == 0:
        loss.item()
    step_no += 1
    return time.perf_counter() - t0


baton = os.environ.get("BENCH_BATON")
blocks = []
if baton:
    fd_in, fd_out, fd_ready = (os.open(p, os.O_RDWR) for p in baton.split(":"))
    for _ in range(int(os.environ.get("BENCH_WARMUP", "20"))):
        step()
    os.write(fd_ready, b"r")
    for _ in range(int(os.environ.get("BENCH_BLOCKS", "30"))):
        if os.read(fd_in, 1) != b"t":
            raise SystemExit("bench baton: unexpected byte")
        blocks.append([step() for _ in range(int(os.environ.get("BENCH_BLOCK_STEPS", "10")))])
        os.write(fd_out, b"t")
else:
    blocks.append([step() for _ in range(int(os.environ.get("BENCH_STEPS", "200")))])
if os.environ.get("BENCH_OUT"):
    with open(os.environ["BENCH_OUT"], "w") as f:
        json.dump({"steps": [t for b in blocks for t in b], "blocks": blocks}, f)
