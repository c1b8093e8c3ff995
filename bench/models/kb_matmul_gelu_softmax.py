import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer (8192 -> 8192) on a batch of 1024, GELU, then softmax over the features."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.softmax(torch.nn.functional.gelu(self.linear(x)), dim=1)


def get_inputs():
    return [torch.rand(1024, 8192)]


def get_init_inputs():
    return [8192, 8192]
