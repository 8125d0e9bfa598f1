"""Where the model trains (tests/integration/xla_cpu.rs): a tied embedding/output weight moved to
the TPU, and a second model left on the CPU (a device chosen by CUDA availability), each trained
one step. The agent must report both (TiedWeights, DevicePlacement)."""
import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(16, 8)
        self.lm_head = nn.Linear(8, 16, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as nanoGPT does

    def forward(self, x):
        return self.lm_head(self.wte(x))


torch.manual_seed(0)
device = torch.accelerator.current_accelerator()
model = TinyLM().to(device)
print("tied after the move:", model.wte.weight is model.lm_head.weight)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randint(0, 16, (4, 5)).to(device)
loss = nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten())
loss.backward()
opt.step()

# The migrated-but-wrong device choice: no CUDA on a TPU VM, so the CPU.
cpu_device = "cuda" if torch.cuda.is_available() else "cpu"
net = nn.Linear(4, 2).to(cpu_device)
opt2 = torch.optim.SGD(net.parameters(), lr=0.1)
net(torch.randn(3, 4, device=cpu_device)).sum().backward()
opt2.step()
print("trained")
