"""DDP over "tpu_dist" with an all_reduce each step, for `tpuport run --nproc` (tests/integration/
ranks.rs): SLOW_RANK=r makes rank r do 80 ms more work per step (a straggler); DIE_RANK=r kills
rank r with SIGKILL on its third step; HANG_RANK=r makes rank r hang there (for --timeout)."""
import os
import signal
import time

import torch
import torch.distributed as dist
from torch import nn

dist.init_process_group("tpu_dist")
rank = dist.get_rank()
model = nn.parallel.DistributedDataParallel(nn.Linear(8, 1).to("tpu"))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(int(os.environ.get("STEPS", "8"))):
    if rank == int(os.environ.get("SLOW_RANK", "-1")):
        time.sleep(0.08)  # this rank's own work, before the collective the others wait in
    if rank == int(os.environ.get("DIE_RANK", "-1")) and step == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    if rank == int(os.environ.get("HANG_RANK", "-1")) and step == 2:
        time.sleep(3600)
    total = torch.ones(1, device="tpu")
    dist.all_reduce(total)  # the others wait here for the slow rank's work
    assert total.item() == dist.get_world_size()
    loss = model(torch.randn(16, 8, device="tpu")).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"rank {rank} done")
dist.destroy_process_group()
