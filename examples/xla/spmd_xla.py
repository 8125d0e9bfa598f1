"""Tensor-parallel MLP training with PyTorch/XLA SPMD (single controller).

In the style of torch_xla's docs/spmd_basic.md and test/spmd/test_train_spmd_linear_model.py:
one process drives every device, the input is sharded on the data axis and the
weights on the model axis with xs.mark_sharding.

    PJRT_DEVICE=TPU XLA_USE_SPMD=1 python spmd_xla.py --steps 10
"""

import argparse
import os

import numpy as np
import torch
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.profiler as xp
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr

os.environ["XLA_FLAGS"] = "--xla_tpu_enable_latency_hiding_scheduler=true"
os.environ.setdefault("LIBTPU_INIT_ARGS", "--xla_enable_async_all_gather=true")
xr.use_spmd()


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--profile-port", type=int, default=9012)
    return p.parse_args()


def main():
    args = parse_args()
    server = xp.start_server(args.profile_port)
    num_devices = xr.global_runtime_device_count()
    mesh_shape = (num_devices // 2, 2)
    device_ids = np.array(range(num_devices))
    mesh = xs.Mesh(device_ids, mesh_shape, ("data", "model"))

    model = nn.Sequential(nn.Linear(args.dim, 4 * args.dim), nn.ReLU(), nn.Linear(4 * args.dim, args.dim))
    model = model.to(torch_xla.device())
    xs.mark_sharding(model[0].weight, mesh, ("model", None))
    xs.mark_sharding(model[2].weight, mesh, (None, "model"))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    for step in range(args.steps):
        with xp.StepTrace("train_step", step_num=step):
            x = torch.randn(args.batch_size, args.dim).to(torch_xla.device())
            xs.mark_sharding(x, mesh, ("data", None))
            optimizer.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            optimizer.step()
        torch_xla.sync()
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
