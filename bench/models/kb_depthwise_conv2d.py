import torch
import torch.nn as nn


class Model(nn.Module):
    """A depthwise 3x3 convolution (one filter per channel) of 16 x 64 x 512 x 512."""

    def __init__(self, channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, groups=channels, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.rand(16, 64, 512, 512)]


def get_init_inputs():
    return [64, 3]
