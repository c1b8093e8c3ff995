"""A loop over batch sizes: the first call compiles, a new size recompiles (then dynamic)."""
import torch


def attention_scores(q, k):
    return torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1)


scores = torch.compile(attention_scores)
for n in (4, 6, 8):
    q = torch.randn(n, 16)
    k = torch.randn(n, 16)
    print(n, scores(q, k).shape)
