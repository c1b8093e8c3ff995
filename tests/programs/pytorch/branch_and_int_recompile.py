"""Data-dependent branch (graph break) and a Python int argument that changes (recompile)."""
import torch


def step(x, scale):
    y = x * scale
    if y.sum() > 0:
        return y.relu()
    return -y


compiled = torch.compile(step)
x = torch.randn(6)
for scale in (1, 2):
    compiled(x, scale)
compiled(-x.abs(), 2)
print("ok")
