"""torch.export first, then torch.compile of the exported program's module."""
import torch
import torch.nn as nn


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(12, 24)

    def forward(self, x):
        a, b = self.proj(x).chunk(2, dim=-1)
        return a * torch.sigmoid(b)


example = (torch.randn(3, 12),)
exported = torch.export.export(Gate(), example)
print(exported.graph_signature)
runnable = torch.compile(exported.module())
print(runnable(*example).shape)
