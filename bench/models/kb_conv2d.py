import torch
import torch.nn as nn


class Model(nn.Module):
    """A 3x3 2-D convolution with bias, then ReLU."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(8, 16, 64, 64)]


def get_init_inputs():
    return [16, 32, 3]
