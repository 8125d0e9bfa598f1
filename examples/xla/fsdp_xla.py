"""A small transformer LM sharded with PyTorch/XLA's FSDP.

In the style of torch_xla's test/test_train_mp_mnist_fsdp_with_ckpt.py: nested
XlaFullyShardedDataParallel wrapping with gradient checkpointing, the optimizer
stepped directly (FSDP reduce-scatters the gradients), sharded checkpoints saved
per rank and consolidated on the master.

    PJRT_DEVICE=TPU python fsdp_xla.py --steps 50
"""

import argparse

import torch
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp
import torch_xla.runtime as xr
from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP
from torch_xla.distributed.fsdp import checkpoint_module, consolidate_sharded_model_checkpoints


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--ckpt-prefix", type=str, default="/tmp/fsdp_lm")
    return p.parse_args()


class TinyLM(nn.Module):
    def __init__(self, vocab, dim, layers=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, nhead=4, dim_feedforward=4 * dim, batch_first=True)
            for _ in range(layers)
        )
        self.head = nn.Linear(dim, vocab)

    def forward(self, x):
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h)
        return self.head(h)


def _mp_fn(index, args):
    device = torch_xla.device()
    rank = xr.global_ordinal()
    world_size = xr.world_size()
    model = TinyLM(args.vocab, args.dim)
    for i, layer in enumerate(model.layers):
        model.layers[i] = FSDP(checkpoint_module(layer), compute_dtype=torch.bfloat16)
    model = FSDP(model.to(device), compute_dtype=torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    for step in range(args.steps):
        tokens = torch.randint(0, args.vocab, (args.batch_size, args.seq_len + 1)).to(device)
        optimizer.zero_grad()
        logits = model(tokens[:, :-1])
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        xm.mark_step()
        if step % 10 == 0:
            print(f"[{rank}/{world_size}] step {step} loss {loss.item():.3f}")

    ckpt = {"model": model.state_dict(), "shard_metadata": model.get_shard_metadata()}
    xm.save(ckpt, f"{args.ckpt_prefix}_rank-{rank:08d}-of-{world_size:08d}.pth", master_only=False)
    xm.rendezvous("ckpt_saved")
    if xm.is_master_ordinal(local=False):
        consolidate_sharded_model_checkpoints(ckpt_prefix=args.ckpt_prefix, ckpt_suffix="_rank-*-of-*.pth")


if __name__ == "__main__":
    torch_xla.launch(_mp_fn, args=(parse_args(),))
