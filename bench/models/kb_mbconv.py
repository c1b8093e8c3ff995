import torch
import torch.nn as nn


class Model(nn.Module):
    """An EfficientNet MBConv block: 1x1 expansion, a 5x5 depthwise convolution with stride 2 and a
    1x1 projection, each with BatchNorm (training mode) and ReLU6."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, expand_ratio):
        super().__init__()
        hidden = in_channels * expand_ratio
        self.expand = nn.Sequential(nn.Conv2d(in_channels, hidden, 1, bias=False), nn.BatchNorm2d(hidden),
                                    nn.ReLU6(inplace=True))
        self.depthwise = nn.Sequential(nn.Conv2d(hidden, hidden, kernel_size, stride, (kernel_size - 1) // 2,
                                                 groups=hidden, bias=False), nn.BatchNorm2d(hidden),
                                       nn.ReLU6(inplace=True))
        self.project = nn.Sequential(nn.Conv2d(hidden, out_channels, 1, bias=False), nn.BatchNorm2d(out_channels))

    def forward(self, x):
        return self.project(self.depthwise(self.expand(x)))


def get_inputs():
    return [torch.rand(10, 112, 224, 224)]


def get_init_inputs():
    return [112, 192, 5, 2, 6]
