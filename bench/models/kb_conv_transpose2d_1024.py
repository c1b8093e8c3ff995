import torch
import torch.nn as nn


class Model(nn.Module):
    """A transposed 3x3 convolution over 1024x1024 maps (input 2.1 GB, output 2.2 GB)."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, bias=False)

    def forward(self, x):
        return self.deconv(x)


batch_size = 8
in_channels = 64
out_channels = 64
kernel_size = 3


def get_inputs():
    return [torch.rand(batch_size, in_channels, 1024, 1024)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
