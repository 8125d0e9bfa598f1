"""Where the model trains (tests/integration/xla_cpu.rs): a tied embedding/output weight moved to
the TPU, and a second model left on the CPU (its `.to(device)` forgotten), each trained one step.
The agent must report both (TiedWeights, DevicePlacement)."""
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

# A second model whose move was forgotten: it trains on the host CPU, on a TPU VM too.
net = nn.Linear(4, 2)
opt2 = torch.optim.SGD(net.parameters(), lr=0.1)
net(torch.randn(3, 4)).sum().backward()
opt2.step()
print("trained")
