"""Train a small GPT on one GPU, or on several with DDP under torchrun: the way CUDA training
scripts are usually written (nanoGPT-style flags, autocast with a GradScaler for float16, TF32,
pinned-memory batches, an optional torch.compile, a checkpoint at the end).

    python train.py --steps 200
    torchrun --nproc-per-node 4 train.py --compile
    tpuport check train.py -o port-report/ -- --steps 20     # is it ready for a TPU?

The data is synthetic (each token mostly follows from the one before), so nothing is downloaded.
"""
import argparse
import math
import os
from contextlib import nullcontext

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from model import GPT

parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda")
parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--block-size", type=int, default=64)
parser.add_argument("--n-layer", type=int, default=2)
parser.add_argument("--n-embd", type=int, default=64)
parser.add_argument("--n-head", type=int, default=4)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--compile", action="store_true")
parser.add_argument("--out-dir", default="out")
parser.add_argument("--log-interval", type=int, default=10)
args = parser.parse_args()

ddp = int(os.environ.get("RANK", -1)) != -1
if ddp:
    dist.init_process_group(backend="nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    device = f"cuda:{local_rank}"
    torch.cuda.set_device(device)
    master = dist.get_rank() == 0
else:
    device = args.device
    master = True
torch.manual_seed(1337)
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
device_type = "cuda" if "cuda" in device else "cpu"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]
ctx = nullcontext() if device_type == "cpu" else torch.autocast(device_type=device_type, dtype=ptdtype)

VOCAB = 64
g = torch.Generator().manual_seed(1234)
stream = torch.empty(8192, dtype=torch.long)
stream[0] = 1
noise = torch.rand(8192, generator=g) < 0.1
rand = torch.randint(0, VOCAB, (8192,), generator=g)
for i in range(1, 8192):
    stream[i] = rand[i] if noise[i] else (stream[i - 1] * 5 + 3) % VOCAB


def get_batch():
    ix = torch.randint(len(stream) - args.block_size - 1, (args.batch_size,))
    x = torch.stack([stream[i:i + args.block_size] for i in ix])
    y = torch.stack([stream[i + 1:i + 1 + args.block_size] for i in ix])
    if device_type == "cuda":
        x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    else:
        x, y = x.to(device), y.to(device)
    return x, y


model = GPT(VOCAB, args.n_embd, args.n_layer, args.n_head, args.block_size).to(device)
scaler = torch.cuda.amp.GradScaler(enabled=(args.dtype == "float16"))
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
if args.compile:
    model = torch.compile(model)
if ddp:
    model = DDP(model, device_ids=[local_rank])

for step in range(args.steps):
    x, y = get_batch()
    with ctx:
        _, loss = model(x, y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    if master and (step % args.log_interval == 0 or step == args.steps - 1):
        lossf = loss.item()
        assert math.isfinite(lossf)
        mem = torch.cuda.max_memory_allocated() / 2**20 if device_type == "cuda" else 0.0
        print(f"step {step}: loss {lossf:.4f}, max memory {mem:.1f} MiB")

if master:
    os.makedirs(args.out_dir, exist_ok=True)
    raw = model.module if ddp else model
    torch.save({"model": raw.state_dict(), "args": vars(args)}, os.path.join(args.out_dir, "ckpt.pt"))
if ddp:
    dist.destroy_process_group()
