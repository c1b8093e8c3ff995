import torch
import torch.nn as nn


class Model(nn.Module):
    """GroupNorm; get_init_inputs returns keyword arguments."""

    def __init__(self, num_features: int, num_groups: int):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)

    def forward(self, x):
        return self.gn(x)


def get_inputs():
    return [torch.randn(8, 64, 32, 32)]


def get_init_inputs():
    return {"num_features": 64, "num_groups": 8}
