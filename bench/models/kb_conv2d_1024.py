import torch
import torch.nn as nn


class Model(nn.Module):
    """A 3x3 2-D convolution on 1024x1024 images: the input needs 1.1 GB, the output 8.6 GB."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1, bias=False)

    def forward(self, x):
        return self.conv(x)


batch_size = 16
in_channels = 16
out_channels = 128
kernel_size = 3
height = width = 1024


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
