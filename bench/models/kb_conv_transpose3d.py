import torch
import torch.nn as nn


class Model(nn.Module):
    """A transposed 3x3x3 convolution of a 64^3 volume with 48 channels."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.deconv = nn.ConvTranspose3d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return self.deconv(x)


def get_inputs():
    return [torch.rand(8, 48, 64, 64, 64)]


def get_init_inputs():
    return [48, 48, 3]
