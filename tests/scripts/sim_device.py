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
# Ops TorchTPU 0.2.0 lacks fail as on a TPU, with its message (issue 13).
try:
    torch.median(torch.randn(5, device="tpu"))
    print("median ran")
except NotImplementedError as e:
    print("median:", e)
# A disabled GradScaler runs; an enabled one needs ops a TPU lacks.
for enabled in (False, True):
    scaler = torch.amp.GradScaler("tpu", enabled=enabled)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    try:
        scaler.scale(model(x).sum()).backward()
        scaler.step(opt)
        scaler.update()
        print("scaler enabled=%s ran" % enabled)
    except NotImplementedError as e:
        print("scaler enabled=%s: %s" % (enabled, e))
# An integer device is the current accelerator's (torch 2.15): the TPU, never CUDA.
moved = nn.Linear(8, 2).to(0)
w = moved(torch.randn(4, 8).to(0)) + torch.zeros(2, device=0)
print("int device", torch.device(0), w.shape)
print("ok", y.shape, y.device.type, z.dtype)
