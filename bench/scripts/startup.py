"""The start-up benchmark's script: import torch, do one tiny op, exit."""
import torch

torch.ones(2).sum()
