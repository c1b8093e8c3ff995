import torch
import torch.nn as nn


class Model(nn.Module):
    """A 3x3x3 convolution of 128 small RGB volumes, softmax over channels, two 2x max pools."""

    def __init__(self, in_channels, out_channels, kernel_size, pool):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.pool1 = nn.MaxPool3d(pool)
        self.pool2 = nn.MaxPool3d(pool)

    def forward(self, x):
        x = torch.softmax(self.conv(x), dim=1)
        return self.pool2(self.pool1(x))


def get_inputs():
    return [torch.rand(128, 3, 16, 128, 128)]


def get_init_inputs():
    return [3, 16, 3, 2]
