# expect: ATN001 DEV001
"""A causal self-attention block built on FlexAttention."""
import torch
import torch.nn as nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


class Attention(nn.Module):
    def __init__(self, dim, heads, seq_len):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.block_mask = create_block_mask(causal, None, None, seq_len, seq_len, device="cuda")

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = flex_attention(q, k, v, block_mask=self.block_mask)
        return self.out(y.transpose(1, 2).reshape(b, t, d))
