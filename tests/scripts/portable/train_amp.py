"""A CUDA training script as people write it (issue 25's portable port is proven on it): the
device chosen by availability, an argparse default, `.cuda()`, float16 autocast with a
GradScaler, a CUDA comparison guarding pinned memory, CUDA events and memory queries. Its
classes are numbered in the order of a set of names (as opacus's char-LSTM example does): two
runs compute the same losses only with the same Python hash seed, which `--losses` fixes."""

import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda")
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.cuda.set_device(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.cuda.amp.GradScaler()
data = torch.randn(8, 16)
languages = list({"English", "French", "German", "Italian", "Dutch", "Greek", "Polish", "Czech"})
target = torch.tensor([languages.index(n) % 4 for n in ["Greek", "Dutch", "English", "Czech"] * 2])
if device.type == "cuda":
    data = data.pin_memory()
start = torch.cuda.Event(enable_timing=True)
end = torch.cuda.Event(enable_timing=True)
for step in range(args.steps):
    start.record()
    x = data.to(args.device, non_blocking=True)
    y = target.cuda()
    with torch.autocast(device_type="cuda", dtype=torch.float16):
        loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    end.record()
    torch.cuda.synchronize()
    print(f"step {step} loss {loss.item():.6f}")
print("allocated", torch.cuda.memory_allocated() >= 0)
torch.cuda.empty_cache()
