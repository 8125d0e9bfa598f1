# expect: STM201 CUD007 STM101 STM102
"""Timing a forward pass with CUDA events, and a copy on a side stream."""
import torch

model = torch.nn.Linear(1024, 1024).cuda()
x = torch.randn(64, 1024, device="cuda")

start = torch.cuda.Event(enable_timing=True)
end = torch.cuda.Event(enable_timing=True)
for _ in range(3):  # warm-up
    model(x)
start.record()
for _ in range(10):
    model(x)
end.record()
torch.cuda.synchronize()
print(f"{start.elapsed_time(end) / 10:.3f} ms per forward")

side = torch.cuda.Stream()
with torch.cuda.stream(side):
    y = x * 2
torch.cuda.current_stream().wait_stream(side)
