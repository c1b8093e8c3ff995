import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """A decoder block that builds its causal mask, position ids and rotary tables on the input's
    device, as real models do (irscope's convention)."""

    def __init__(self, d=128, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        half = d // heads // 2
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(half).float() / half)))

    def rope(self, x, positions):
        angles = positions[:, None].to(x.dtype) * self.inv_freq.to(x.device)[None, :]
        cos, sin = angles.cos(), angles.sin()
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)

    def forward(self, x):
        b, t, d = x.shape
        positions = torch.arange(t, device=x.device)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        q, k = self.rope(q, positions), self.rope(k, positions)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


model = Block()
example_inputs = (torch.randn(4, 64, 128),)
