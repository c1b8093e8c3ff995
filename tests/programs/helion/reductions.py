"""
Sum and mean
============
Reductions over the last dimension, and a long sum that loops over the row in blocks.
"""
from __future__ import annotations

import torch

import helion
from helion._testing import DEVICE
from helion._testing import run_example
import helion.language as hl


@helion.kernel()
def sum_rows(x: torch.Tensor) -> torch.Tensor:
    m, _n = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        out[tile_m] = x[tile_m, :].sum(-1)
    return out


@helion.kernel()
def mean_rows(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        out[tile_m] = x[tile_m, :].to(torch.float32).sum(-1) / n
    return out


@helion.kernel()
def long_sum(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    block_n = hl.register_block_size(n)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, block_n], dtype=torch.float32)
        for tile_n in hl.tile(n, block_size=block_n):
            acc += x[tile_m, tile_n].to(torch.float32)
        out[tile_m] = acc.sum(-1).to(x.dtype)
    return out


def main() -> None:
    x = torch.randn([512, 8192], device=DEVICE, dtype=torch.float32)
    run_example(sum_rows, lambda x: x.sum(-1), (x,))
    run_example(mean_rows, lambda x: x.mean(-1), (x,))
    run_example(long_sum, lambda x: x.sum(-1), (x,))


if __name__ == "__main__":
    main()
