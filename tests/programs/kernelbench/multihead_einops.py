import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange


class Model(nn.Module):
    """Multi-head self-attention with the head split written in einops."""

    def __init__(self, dim, heads):
        super(Model, self).__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        q, k, v = rearrange(self.qkv(x), "b n (three h d) -> three b h n d", three=3, h=self.heads)
        att = F.softmax(torch.einsum("bhid,bhjd->bhij", q, k) * q.shape[-1] ** -0.5, dim=-1)
        y = torch.einsum("bhij,bhjd->bhid", att, v)
        return self.out(rearrange(y, "b h n d -> b n (h d)"))


batch_size = 2
seq_len = 8
dim = 32
heads = 4


def get_inputs():
    return [torch.randn(batch_size, seq_len, dim)]


def get_init_inputs():
    return [dim, heads]
