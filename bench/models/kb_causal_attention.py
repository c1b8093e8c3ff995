import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """minGPT-style causal self-attention written out (no fused kernel): the 512 x 512 score
    matrices of 128 sequences x 8 heads need 1.1 GB each time they are materialized."""

    def __init__(self, n_embd, n_head, max_seqlen):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head
        self.register_buffer("bias", torch.tril(torch.ones(max_seqlen, max_seqlen)).view(1, 1, max_seqlen,
                                                                                         max_seqlen))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(c, dim=2)
        q = q.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        k = k.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        v = v.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        y = torch.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


def get_inputs():
    return [torch.rand(128, 512, 768)]


def get_init_inputs():
    return [768, 8, 1024]
