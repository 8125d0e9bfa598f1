# expect: OPS001 DEV016
"""Robust statistics with ops TorchTPU 0.2.0 has no kernel for."""
import torch
import torch.nn.functional as F


def robust_loss(pred, target):
    err = pred - target
    med = torch.median(err)
    scale = torch.nansum(err.abs()) / err.numel()
    return F.huber_loss(pred, target) + (med / scale) ** 2


x = torch.randn(128, device="cuda")
print(robust_loss(x, torch.zeros_like(x)))
