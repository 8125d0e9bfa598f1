"""A CUDA training script with a CPU fallback (issue 25): it picks CUDA when there is one and the
CPU otherwise, so it was written for CPU-only machines too (a laptop, CI on a CPU-only torch
wheel). Its float16 AMP is built unconditionally (torch disables it without CUDA), its
argparse defaults and a default argument name "cuda", and it builds a device string with an
index. The port must run the same there: `current_accelerator()` is None on a CPU-only build."""
import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--backend", default="nccl")
parser.add_argument("--amp-device", default="cuda")
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
index_device = f"cuda:{0}" if torch.cuda.is_available() else "cpu"


def evaluate(model, x, device="cuda"):
    return model(x.to(device)).sum().item()


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.cuda.amp.GradScaler()
data = torch.randn(8, 16)
target = torch.randn(8, 4)
for step in range(4):
    x, y = data.to(index_device), target.to(device)
    with torch.cuda.amp.autocast():
        loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    print(f"step {step} loss {loss.item():.9f}")
if torch.cuda.is_available():
    print("eval", evaluate(model, data))
print("backend", args.backend, "amp device", args.amp_device)
