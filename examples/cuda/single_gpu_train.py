"""Train a tiny character-level transformer on a single GPU.

A stripped-down, nanoGPT-flavoured script: random token data, one device,
no distributed setup. Falls back to the CPU when CUDA is not available.
"""

import math
import time
from contextlib import nullcontext

import torch
import torch.nn as nn
from torch import cuda
from torch.nn import functional as F

config = {
    "device": "cuda",
    "vocab_size": 128,
    "block_size": 64,
    "n_layer": 2,
    "n_head": 4,
    "n_embd": 128,
    "batch_size": 32,
    "max_iters": 500,
    "eval_interval": 100,
    "learning_rate": 3e-4,
}

torch.manual_seed(1337)
device = "cuda" if torch.cuda.is_available() else "cpu"
device_type = "cuda" if "cuda" in device else "cpu"  # for later use in torch.autocast
ctx = nullcontext() if device_type == "cpu" else torch.autocast(device_type=device_type, dtype=torch.bfloat16)


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = nn.MultiheadAttention(n_embd, n_head, batch_first=True)
        self.ln2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        T = x.size(1)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["n_embd"])
        self.pos_emb = nn.Embedding(cfg["block_size"], cfg["n_embd"])
        self.blocks = nn.Sequential(*[Block(cfg["n_embd"], cfg["n_head"]) for _ in range(cfg["n_layer"])])
        self.ln_f = nn.LayerNorm(cfg["n_embd"])
        self.head = nn.Linear(cfg["n_embd"], cfg["vocab_size"], bias=False)

    def forward(self, idx, targets=None):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.blocks(self.tok_emb(idx) + self.pos_emb(pos))
        logits = self.head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def get_batch():
    x = torch.randint(config["vocab_size"], (config["batch_size"], config["block_size"]))
    y = torch.roll(x, shifts=-1, dims=1)
    if device_type == "cuda":
        # pin arrays x,y, which allows us to move them to GPU asynchronously (non_blocking=True)
        x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    else:
        x, y = x.to(device), y.to(device)
    return x, y


@torch.no_grad()
def estimate_loss(model, eval_iters=20):
    model.eval()
    losses = torch.zeros(eval_iters)
    for k in range(eval_iters):
        x, y = get_batch()
        with ctx:
            _, loss = model(x, y)
        losses[k] = loss.item()
    model.train()
    return losses.mean().item()


def log_env(cuda: bool):
    """Print where we are running; `cuda` is just a flag here, not the module."""
    if cuda:
        idx = torch.cuda.current_device()
        print(f"running on GPU {idx}: {torch.cuda.get_device_name()}")
    else:
        print("running on CPU, this will be slow")


def main():
    log_env(cuda.is_available())
    model = TinyGPT(config)
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["learning_rate"])
    print(f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters")

    t0 = time.time()
    for it in range(config["max_iters"]):
        if it % config["eval_interval"] == 0:
            print(f"iter {it}: val loss {estimate_loss(model):.4f} (uniform {math.log(config['vocab_size']):.4f})")
        xb, yb = get_batch()
        with ctx:
            _, loss = model(xb, yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    if device_type == "cuda":
        cuda.synchronize()
    print(f"trained {config['max_iters']} iters in {time.time() - t0:.1f}s, final loss {loss.item():.4f}")

    # Quick sanity check that sampling also works when pinned to the first GPU explicitly.
    if torch.cuda.is_available():
        with torch.cuda.device(0):
            prompt = torch.zeros((1, 1), dtype=torch.long, device=torch.device("cuda", 0))
            assert prompt.is_cuda, "prompt should live on the GPU"
            logits, _ = model(prompt)
            print("next token:", torch.argmax(logits[0, -1]).item())


if __name__ == "__main__":
    main()
