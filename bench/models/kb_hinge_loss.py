import torch
import torch.nn as nn


class Model(nn.Module):
    """The hinge loss of 32,768 predictions against +-1 targets: small, it runs."""

    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


def get_inputs():
    return [torch.rand(32768, 32768 // 512), torch.randint(0, 2, (32768, 1)).float() * 2 - 1]


def get_init_inputs():
    return []
