import torch
import torch.nn as nn


class Model(nn.Module):
    """A strided transposed 2-D convolution (upsampling), then tanh."""

    def __init__(self, in_channels, out_channels, kernel_size, stride):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=1,
                                         output_padding=1)

    def forward(self, x):
        return torch.tanh(self.deconv(x))


def get_inputs():
    return [torch.randn(8, 32, 32, 32)]


def get_init_inputs():
    return [32, 16, 3, 2]
