import torch
import torch.nn as nn


class Model(nn.Module):
    """A 3-D convolution, then a channel-wise scale."""

    def __init__(self, in_channels, out_channels, kernel_size, scale):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.scale = scale

    def forward(self, x):
        return self.conv(x) * self.scale


def get_inputs():
    return [torch.randn(4, 8, 16, 32, 32)]


def get_init_inputs():
    return [8, 16, 3, 0.5]
