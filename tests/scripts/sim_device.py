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
print("ok", y.shape, y.device.type, z.dtype)
