import torch
import torch.nn as nn


class Model(nn.Module):
    """LayerNorm over the last three dimensions."""

    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        return self.ln(x)


batch_size = 16
features = 64
dim1 = 32
dim2 = 32


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [(features, dim1, dim2)]
