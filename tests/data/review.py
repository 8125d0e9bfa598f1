import torch

x = torch.zeros(3, device="cuda")
torch.cuda.synchronize()
y = x.cuda()
