"""A debugging print in the middle of a compiled function: two graphs and a graph break."""
import torch


@torch.compile
def normalize(x):
    centered = x - x.mean(dim=0)
    print("centered ready")
    return centered / (centered.std(dim=0) + 1e-5)


out = normalize(torch.randn(32, 4))
print(out.shape)
