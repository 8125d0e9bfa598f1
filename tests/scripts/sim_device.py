"""A ported script that uses the "tpu" device: runs on the host under the sim target."""
import torch
from torch import nn

import tpuport

device = torch.device("tpu")
model = nn.Linear(8, 2).to(device)
x = torch.randn(4, 8, device="tpu")
y = model(x.to("tpu:0"))
with torch.autocast("tpu", dtype=torch.bfloat16):
    z = model(x)
for i in range(3):
    tpuport.step(samples=4)
# The common CUDA idiom, ported: a pinned batch copied without blocking (issue 13).
batch = torch.randn(4, 8).pin_memory().to(device, non_blocking=True)
print("pinned", batch.shape)
print("ok", y.shape, y.device.type, z.dtype)
