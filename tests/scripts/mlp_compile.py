"""An MLP training loop with torch.compile(dynamic=False) and changing batch sizes.

At the end it writes what Dynamo itself counted to the file named by $DYNAMO_COUNTS (JSON), so
tests can compare tpuport's events with Dynamo's own numbers.
"""
import json
import os
import sys

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
step_fn = torch.compile(model, backend="eager", dynamic=False)

batch_sizes = [int(b) for b in (sys.argv[1:] or ["8", "8", "16", "8", "32", "16", "8"])]
losses = []
for bs in batch_sizes:
    x = torch.randn(bs, 32)
    y = x.sum(dim=1, keepdim=True)
    loss = nn.functional.mse_loss(step_fn(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
print("loss", losses[0], "->", losses[-1])

metrics = torch._dynamo.utils.get_compilation_metrics()
before_reset = sum(1 for m in metrics if m.is_forward is not False)
frames_ok = torch._dynamo.utils.counters["frames"]["ok"]

# Scripts reset Dynamo (tests, notebooks); tpuport must keep observing after that.
torch._dynamo.reset()
torch._dynamo.utils.counters.clear()
double = torch.compile(lambda t: t * 2, backend="eager", dynamic=False)
double(torch.ones(3))
forward_records = sum(1 for m in torch._dynamo.utils.get_compilation_metrics() if m.is_forward is not False)
frames_ok_after = torch._dynamo.utils.counters["frames"]["ok"]

counts = {
    "frames_ok_before_reset": frames_ok,
    "frames_ok_after_reset": frames_ok_after,
    "forward_records_before_reset": before_reset,
    "forward_records": forward_records,
    "optimizer_steps": len(batch_sizes),
    "item_calls": len(batch_sizes),
}
if os.environ.get("DYNAMO_COUNTS"):
    with open(os.environ["DYNAMO_COUNTS"], "w") as f:
        json.dump(counts, f)
