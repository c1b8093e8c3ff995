import torch
import torch.nn as nn
from einops import rearrange, repeat


class Model(nn.Module):
    """A decayed cumulative sum over chunks of a sequence (the shape of a chunked state-space scan)."""

    def __init__(self, heads, chunk):
        super(Model, self).__init__()
        self.chunk = chunk
        self.decay = nn.Parameter(torch.rand(heads))

    def forward(self, x):
        blocks = rearrange(x, "b (c l) h d -> b c l h d", l=self.chunk)
        weights = repeat(torch.sigmoid(self.decay), "h -> b c l h 1", b=x.shape[0], c=blocks.shape[1], l=self.chunk)
        states = torch.cumsum(blocks * weights, dim=2)
        return rearrange(states, "b c l h d -> b (c l) h d")


batch_size = 2
seq_length = 16
heads = 2
d_head = 8
chunk = 4


def get_inputs():
    return [torch.randn(batch_size, seq_length, heads, d_head)]


def get_init_inputs():
    return [heads, chunk]
