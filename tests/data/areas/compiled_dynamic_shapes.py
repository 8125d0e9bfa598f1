# expect: DYN001 DYN002 DYN003 DYN004 CMP004 CMP006 CMP101
"""Compiled code whose shapes depend on the data."""
import torch
import torch.distributed as dist


@torch.compile(mode="max-autotune", dynamic=True)
def sparse_loss(logits, labels):
    valid = labels != -100
    picked = logits[valid]
    idx = torch.nonzero(valid)
    classes = torch.unique(labels[valid])
    if picked.numel() == 0 or (labels < 0).all():
        return logits.sum() * 0.0
    if dist.get_rank() == 0:
        print("classes", classes.tolist())
    return torch.nn.functional.cross_entropy(picked, labels[valid]) + idx.float().mean() * 0
