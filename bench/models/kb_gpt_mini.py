import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A two-layer GPT: token and position embeddings, pre-norm blocks with causal SDPA, tied LM head.
    Position ids are made on the tokens' device."""

    def __init__(self, vocab: int, d: int, heads: int, layers: int, max_len: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList([nn.ModuleDict({
            "ln1": nn.LayerNorm(d), "qkv": nn.Linear(d, 3 * d), "proj": nn.Linear(d, d),
            "ln2": nn.LayerNorm(d), "fc1": nn.Linear(d, 4 * d), "fc2": nn.Linear(4 * d, d)}) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.heads = heads

    def forward(self, tokens):
        b, t = tokens.shape
        x = self.tok(tokens) + self.pos(torch.arange(t, device=tokens.device))[None]
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).chunk(3, dim=-1)
            q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, -1)
            x = x + blk["proj"](y)
            x = x + blk["fc2"](F.gelu(blk["fc1"](blk["ln2"](x))))
        return self.ln_f(x) @ self.tok.weight.t()


def get_inputs():
    return [torch.randint(0, 8192, (4, 128))]


def get_init_inputs():
    return [8192, 256, 4, 2, 512]
