"""DistributedDataParallel on PyTorch/XLA with the "xla" process-group backend.

In the style of torch_xla's test/test_train_mp_mnist.py --ddp: each process joins
the xla:// rendezvous, wraps the model in DDP and steps the optimizer with
xm.optimizer_step (DDP already averages the gradients).

    PJRT_DEVICE=TPU python ddp_xla.py --epochs 1
"""

import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.xla_backend
import torch_xla.distributed.xla_multiprocessing as xmp
import torch_xla.runtime as xr
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--device", type=str, default="xla")
    return parser.parse_args()


class MNISTNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 10, 5), nn.MaxPool2d(2), nn.ReLU(),
            nn.Conv2d(10, 20, 5), nn.MaxPool2d(2), nn.ReLU(),
            nn.Flatten(), nn.Linear(320, 50), nn.ReLU(), nn.Linear(50, 10),
        )

    def forward(self, x):
        return self.net(x)


def _mp_fn(index, args):
    dist.init_process_group("xla", init_method="xla://")
    device = torch.device(args.device)
    rank = xr.global_ordinal()
    world_size = xr.world_size()

    data = TensorDataset(torch.randn(2048, 1, 28, 28), torch.randint(0, 10, (2048,)))
    sampler = DistributedSampler(data, num_replicas=world_size, rank=rank)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    para_loader = pl.ParallelLoader(loader, [device])

    model = MNISTNet().to(device)
    xm.broadcast_master_param(model)
    ddp_model = DDP(model, gradient_as_bucket_view=True)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=args.lr * world_size, momentum=0.5)
    loss_fn = nn.NLLLoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(para_loader.per_device_loader(device)):
            optimizer.zero_grad()
            loss = loss_fn(torch.log_softmax(ddp_model(x), dim=1), y)
            loss.backward()
            xm.optimizer_step(optimizer)
            if step % 10 == 0:
                mean_loss = xm.all_reduce(xm.REDUCE_SUM, loss.detach(), scale=1.0 / world_size)
                xm.master_print(f"epoch {epoch} step {step} loss {mean_loss.item():.4f}")
        xm.mark_step()
    if xm.is_master_ordinal(local=False):
        print("done on", xm.xla_device_hw(device))
    dist.destroy_process_group()


if __name__ == "__main__":
    xmp.spawn(_mp_fn, args=(parse_args(),), start_method="fork")
