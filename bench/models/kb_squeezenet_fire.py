import torch
import torch.nn as nn


class Model(nn.Module):
    """A SqueezeNet fire module: a 1x1 squeeze, then 1x1 and 3x3 expands concatenated."""

    def __init__(self, in_channels, squeeze, expand1x1, expand3x3):
        super().__init__()
        self.squeeze = nn.Conv2d(in_channels, squeeze, kernel_size=1)
        self.expand1x1 = nn.Conv2d(squeeze, expand1x1, kernel_size=1)
        self.expand3x3 = nn.Conv2d(squeeze, expand3x3, kernel_size=3, padding=1)

    def forward(self, x):
        x = torch.relu(self.squeeze(x))
        return torch.cat([torch.relu(self.expand1x1(x)), torch.relu(self.expand3x3(x))], 1)


def get_inputs():
    return [torch.rand(128, 3, 256, 256)]


def get_init_inputs():
    return [3, 6, 64, 64]
