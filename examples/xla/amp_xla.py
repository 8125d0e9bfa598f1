"""Mixed-precision (bf16) training of an MLP classifier with torch_xla.amp.

In the style of torch_xla's test/test_train_mp_imagenet.py --amp path, reduced to
one device: autocast("xla"), the syncfree AdamW optimizer, xm.mark_step() per step
and a metrics report at the end. Synthetic data, no downloads.

    PJRT_DEVICE=TPU python amp_xla.py --steps 20
"""

import argparse
import os

import torch
import torch.nn as nn
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from torch_xla.amp import autocast, syncfree

os.environ["PJRT_DEVICE"] = "TPU"
os.environ["XLA_USE_BF16"] = "1"


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--lr", type=float, default=1e-3)
    return p.parse_args()


def main():
    args = parse_args()
    xm.set_rng_state(0)
    device = xm.xla_device()
    model = nn.Sequential(
        nn.Linear(args.features, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, args.classes)
    ).to(device)
    optimizer = syncfree.AdamW(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()

    for step in range(args.steps):
        x = torch.randn(args.batch_size, args.features, device=device)
        y = torch.randint(0, args.classes, (args.batch_size,), device=device)
        optimizer.zero_grad()
        with autocast(xm.xla_device()):
            loss = loss_fn(model(x), y)
        loss.backward()
        xm.optimizer_step(optimizer)
        xm.mark_step()
        if step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    if xm.is_master_ordinal():
        print(met.short_metrics_report())
    met.clear_all()


if __name__ == "__main__":
    main()
