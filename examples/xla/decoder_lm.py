"""A small decoder-only language model trained with torch_xla.compile and torch_xla.sync.

In the style of the PyTorch/XLA 2.x examples (examples/train_decoder_only_base.py):
one device, the forward pass and loss compiled with torch_xla.compile, the graph cut with
torch_xla.sync() at the end of each step. Synthetic tokens, no downloads.

    PJRT_DEVICE=TPU python decoder_lm.py --steps 20
"""

import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_xla
import torch_xla.core.xla_model as xm


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=32)
    p.add_argument("--vocab", type=int, default=128)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-4)
    return p.parse_args()


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class DecoderOnly(nn.Module):
    def __init__(self, vocab, dim, layers, heads, seq_len):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(1, seq_len, dim))
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos[:, : idx.size(1)]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def main():
    args = parse_args()
    torch_xla.manual_seed(0)
    device = torch_xla.device()
    model = DecoderOnly(args.vocab, args.dim, args.layers, args.heads, args.seq_len).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"parameters: {n_params / 1e3:.1f}K on {xm.xla_device_hw(device)}")

    def forward_loss(tokens):
        logits = model(tokens[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1))

    compiled_loss = torch_xla.compile(forward_loss, full_graph=True)
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        tokens = torch.randint(0, args.vocab, (args.batch_size, args.seq_len + 1), device=device)
        with torch_xla.step():
            optimizer.zero_grad()
            loss = compiled_loss(tokens)
            loss.backward()
            optimizer.step()
        torch_xla.sync()
        if step % 5 == 0:
            xm.add_step_closure(lambda l=loss, s=step: print(f"step {s} loss {l.item():.3f} ppl {math.exp(l.item()):.1f}"))
    xm.wait_device_ops()
    print(f"{args.steps} steps in {time.perf_counter() - start:.2f}s")


if __name__ == "__main__":
    main()
