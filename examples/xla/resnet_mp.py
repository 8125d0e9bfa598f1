"""ResNet training on synthetic images with PyTorch/XLA multiprocessing.

In the style of torch_xla's test/test_train_mp_imagenet.py: one process per TPU
core started with xmp.spawn, batches fed by MpDeviceLoader, gradients reduced by
xm.optimizer_step.

    PJRT_DEVICE=TPU python resnet_mp.py --epochs 2
"""

import argparse
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.xla_multiprocessing as xmp
import torch_xla.runtime as xr
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

os.environ["PJRT_DEVICE"] = "TPU"


def parse_args():
    parser = argparse.ArgumentParser(description="ResNet on synthetic data")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--num-samples", type=int, default=1024)
    parser.add_argument("--log-steps", type=int, default=10)
    parser.add_argument("--checkpoint", type=str, default="/tmp/resnet.pt")
    parser.add_argument("--metrics-debug", action="store_true")
    return parser.parse_args()


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.short(x))


class ResNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.layers = nn.Sequential(BasicBlock(16, 16), BasicBlock(16, 32, 2), BasicBlock(32, 64, 2))
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def make_loader(args):
    images = torch.randn(args.num_samples, 3, 32, 32)
    labels = torch.randint(0, 10, (args.num_samples,))
    dataset = TensorDataset(images, labels)
    sampler = DistributedSampler(
        dataset, num_replicas=xr.world_size(), rank=xr.global_ordinal(), shuffle=True
    )
    return DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True, num_workers=2)


def train_loop(model, loader, optimizer, epoch, args):
    tracker = time.perf_counter()
    model.train()
    for step, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        xm.optimizer_step(optimizer)
        if step % args.log_steps == 0:
            elapsed = time.perf_counter() - tracker
            xm.master_print(f"epoch {epoch} step {step} loss {loss.item():.4f} ({elapsed:.1f}s)")


def test_loop(model, loader):
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=xm.xla_device())
    total = 0
    with torch.no_grad():
        for data, target in loader:
            correct += (model(data).argmax(1) == target).sum()
            total += target.size(0)
    accuracy = xm.mesh_reduce("test_accuracy", correct.item() / max(total, 1), lambda xs: sum(xs) / len(xs))
    return accuracy


def _mp_fn(index, args):
    torch.manual_seed(1)
    device = xm.xla_device()
    train_loader = make_loader(args)
    test_loader = make_loader(args)
    train_device_loader = pl.MpDeviceLoader(train_loader, device)
    test_device_loader = pl.MpDeviceLoader(test_loader, device)

    model = ResNet().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * xr.world_size(), momentum=0.9)
    for epoch in range(1, args.epochs + 1):
        train_loader.sampler.set_epoch(epoch)
        train_loop(model, train_device_loader, optimizer, epoch, args)
        accuracy = test_loop(model, test_device_loader)
        xm.master_print(f"epoch {epoch} accuracy {accuracy:.3f}")
        if args.metrics_debug:
            xm.master_print(met.metrics_report())
    xm.rendezvous("training_done")
    xm.save(model.state_dict(), args.checkpoint)


if __name__ == "__main__":
    xmp.spawn(_mp_fn, args=(parse_args(),))
