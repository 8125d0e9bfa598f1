# expect: AMP002 AMP010 DEV001 PERF002 AMP009
"""An fp16 mixed-precision training loop with a GradScaler, as CUDA tutorials write it."""
import torch
import torch.nn as nn

device = "cuda"
model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cuda")
criterion = nn.CrossEntropyLoss()


def train(loader, epochs=1):
    for epoch in range(epochs):
        for step, (x, y) in enumerate(loader):
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")


def export(path):
    torch.save(model.half().state_dict(), path)
