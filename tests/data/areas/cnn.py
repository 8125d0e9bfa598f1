# expect: PERF001 DEV006 DEV007 PERF002
"""A small CNN trained on CIFAR-like images."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc = nn.Linear(64 * 8 * 8, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def main(loader):
    model = ConvNet().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for images, labels in loader:
        images, labels = images.cuda(), labels.cuda()
        loss = F.cross_entropy(model(images), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(loss.item())
    return model.to("cpu")
