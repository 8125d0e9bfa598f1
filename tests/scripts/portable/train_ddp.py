"""A one-process DDP script written for NCCL: the backend, `set_device(LOCAL_RANK)`, a
`cuda:{rank}` device, DDP over it with its GPU index (`device_ids=[local_rank]`: on the host,
`--cuda-on-cpu` drops it, as DDP takes a CPU module only without it), a bfloat16 autocast and a
checkpoint mapped to the device."""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
local_rank = int(os.environ.get("LOCAL_RANK", "0"))
dist.init_process_group(backend="nccl", rank=0, world_size=1)
torch.cuda.set_device(local_rank)
device = torch.device(f"cuda:{local_rank}")
model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1)).to(device)
model = DDP(model, device_ids=[local_rank])
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
x = torch.randn(32, 16, device="cuda")
y = torch.randn(32, 1, device="cuda")
for step in range(5):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(x)
    loss = nn.functional.mse_loss(out.float(), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if dist.get_backend() == "nccl":
        dist.barrier()
    print(f"step {step} loss {loss.item():.6f}")
torch.save(model.module.state_dict(), "ckpt.pt")
state = torch.load("ckpt.pt", map_location=f"cuda:{local_rank}")
print("reloaded", len(state))
dist.destroy_process_group()
