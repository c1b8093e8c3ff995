import torch
import torch.nn as nn


class Model(nn.Module):
    """A DenseNet transition layer: BatchNorm (training), ReLU, a 1x1 convolution, 2x2 average pool."""

    def __init__(self, num_input_features, num_output_features):
        super().__init__()
        self.transition = nn.Sequential(
            nn.BatchNorm2d(num_input_features),
            nn.ReLU(inplace=True),
            nn.Conv2d(num_input_features, num_output_features, kernel_size=1, bias=False),
            nn.AvgPool2d(kernel_size=2, stride=2),
        )

    def forward(self, x):
        return self.transition(x)


def get_inputs():
    return [torch.rand(128, 32, 256, 256)]


def get_init_inputs():
    return [32, 64]
