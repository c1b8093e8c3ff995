import torch
import torch.nn as nn


class MLP(nn.Module):
    """A three-layer MLP with SiLU and dropout (irscope's convention)."""

    def __init__(self, dims=(512, 2048, 2048, 10)):
        super().__init__()
        layers = []
        for a, b in zip(dims, dims[1:]):
            layers += [nn.Linear(a, b), nn.SiLU(), nn.Dropout(0.1)]
        self.net = nn.Sequential(*layers[:-2])

    def forward(self, x):
        return self.net(x)


model = MLP().eval()
example_inputs = (torch.randn(64, 512),)
