# The classes of wrong safe fixes found on unseen code (bench/README.md, "Issue 25 evaluation"),
# one case each: under --to portable each fix keeps the CUDA machine and is right on a TPU.
import argparse
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.utils.data import DataLoader


# 1. Device literals in default arguments (evaluated at import): the portable form raises on no
#    machine where "cuda" did not (torch.device("tpu") raised without TorchTPU).
def load(path, device=torch.device("cuda")):
    return torch.load(path, map_location=device)


def build(width, device="cuda"):
    return nn.Linear(width, width).to(device)


@dataclass
class Config:
    device: str = "cuda"
    backend: str = "nccl"


parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda")
args = parser.parse_args()


# 2. A comparison in front of a float16 GradScaler stays CUDA's (GradScaler("tpu") has no
#    kernels); one in front of pinned memory is extended.
def train(model, loader, device):
    use_amp = device.type in ("cuda",)
    scaler = torch.amp.GradScaler(device.type, enabled=use_amp)
    pin = device.type == "cuda"
    loader = DataLoader(loader.dataset, pin_memory=pin)
    for x, y in loader:
        with torch.autocast(device.type, dtype=torch.float16, enabled=use_amp):
            loss = model(x.to(device)).sum()
        scaler.scale(loss).backward()


# 3. A chain that also picks MPS or XPU: extended with an accelerator branch, the CUDA branch
#    kept.
def pick_device():
    if torch.cuda.is_available():
        device = "cuda"
    elif torch.backends.mps.is_available():
        device = "mps"
    else:
        device = "cpu"
    return device


# 4. A CUDA test's body moved while the test stays: the body's portable forms are CUDA's own on
#    a CUDA machine (the test still sends a TPU elsewhere, and says so).
use_cuda = torch.cuda.is_available()
net = nn.Linear(4, 4)
if use_cuda:
    net.cuda()
    torch.backends.cudnn.benchmark = True


def step(x, y):
    if use_cuda:
        x, y = x.cuda(), y.cuda()
    return net(x), y


# 5. A CUDA count that gates DataParallel stays: on a multi-chip TPU host torch.accelerator
#    counts the chips, and DataParallel's CUDA broadcasts fail there (set H).
def wrap(model):
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    return model


if __name__ == "__main__":
    step(torch.randn(2, 4), torch.randn(2, 4))
