import torch
import torch.nn as nn


class Model(nn.Module):
    """A GEMM of a 1024 x 8192 batch with an 8192 x 8192 weight, a bias, then ReLU."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        return torch.relu(self.gemm(x) + self.bias)


def get_inputs():
    return [torch.rand(1024, 8192)]


def get_init_inputs():
    return [8192, 8192]
