import torch
import torch.nn as nn


class BasicBlock(nn.Module):
    """ResNet's basic block with a projection shortcut, in inference mode (irscope's convention,
    inputs built by a function)."""

    def __init__(self, cin=64, cout=128, stride=2):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + self.shortcut(x))


model = BasicBlock().eval()


def example_inputs():
    return (torch.randn(8, 64, 56, 56),)
