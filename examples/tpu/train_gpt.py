"""A ported GPT training script in TorchTPU style: device and process-group backend from flags,
AdamW, autocast bf16, GradScaler disabled (TPUs need no loss scaling), torch.compile, DDP when
launched with torchrun.

    tpuport run --target sim --no-tui examples/tpu/train_gpt.py --steps 50
    torchrun --nproc-per-node 2 --no-python \
        tpuport run --target sim --no-tui examples/tpu/train_gpt.py --steps 20

The data is synthetic (a token stream where each token mostly follows from the one before), so the loss falls
within a few dozen steps and nothing is downloaded. `--vary-seq N` feeds N different sequence
lengths (one recompile per new shape under dynamic=False); `--buckets` pads them to two lengths.
"""
import argparse
import math
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--device", default="tpu")
parser.add_argument("--backend", default="tpu_dist", help="process-group backend under torchrun")
parser.add_argument("--steps", type=int, default=50)
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--seq-len", type=int, default=32)
parser.add_argument("--vary-seq", type=int, default=0, metavar="N", help="cycle through N sequence lengths")
parser.add_argument("--buckets", action="store_true", help="pad varying lengths to two buckets")
parser.add_argument("--no-compile", action="store_true")
parser.add_argument("--lr", type=float, default=3e-3)
args = parser.parse_args()

distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
if distributed:
    dist.init_process_group(backend=args.backend)
    torch.accelerator.set_device_index(0)  # one device per process
rank = dist.get_rank() if distributed else 0
device = torch.device(args.device)
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=64, d=64, layers=2, heads=4, max_len=128):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


model = GPT().to(device)
if distributed:
    model = nn.parallel.DistributedDataParallel(model)
opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
scaler = torch.amp.GradScaler(enabled=False)
step_fn = model if args.no_compile else torch.compile(model)

# A learnable token stream: each token follows from the one before (t -> 5t + 3 mod 64), with 10 %
# of the tokens random, so the best possible loss is well below log(64) = 4.16.
g = torch.Generator().manual_seed(1234)
stream = torch.empty(4096, dtype=torch.long)
stream[0] = 1
noise = torch.rand(4096, generator=g) < 0.1
rand = torch.randint(0, 64, (4096,), generator=g)
for i in range(1, 4096):
    stream[i] = rand[i] if noise[i] else (stream[i - 1] * 5 + 3) % 64
data_gen = torch.Generator().manual_seed(rank)
lengths = [args.seq_len] if args.vary_seq <= 0 else [8 + 4 * i for i in range(args.vary_seq)]


def batch(step):
    t = lengths[step % len(lengths)]
    starts = torch.randint(0, stream.numel() - t - 1, (args.batch,), generator=data_gen)
    x = torch.stack([stream[s:s + t] for s in starts])
    y = torch.stack([stream[s + 1:s + t + 1] for s in starts])
    if args.buckets:  # pad to the next of two buckets; padded targets are ignored by the loss
        bucket = 32 if t <= 32 else 64
        x = F.pad(x, (0, bucket - t))
        y = F.pad(y, (0, bucket - t), value=-100)
    return x.to(device), y.to(device)


for step in range(args.steps):
    x, y = batch(step)
    with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16):
        logits = step_fn(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1), ignore_index=-100)
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    if step % 10 == 0 or step == args.steps - 1:
        value = loss.item()
        assert math.isfinite(value), "loss is not finite"
        if rank == 0:
            print(f"step {step:4d}  loss {value:.4f}", flush=True)
if distributed:
    dist.destroy_process_group()
