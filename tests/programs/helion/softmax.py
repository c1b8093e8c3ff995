"""
Softmax
=======
Row softmax in Helion three ways: PyTorch's own softmax inside a tile, the steps written out, and
an online two-pass version with block sizes registered for the autotuner.
"""
from __future__ import annotations

import torch

import helion
from helion._testing import DEVICE
from helion._testing import run_example
import helion.language as hl


@helion.kernel()
def softmax(x: torch.Tensor) -> torch.Tensor:
    n, _m = x.size()
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        out[tile_n, :] = torch.nn.functional.softmax(x[tile_n, :], dim=1)
    return out


@helion.kernel()
def softmax_steps(x: torch.Tensor) -> torch.Tensor:
    n, _m = x.size()
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        row = x[tile_n, :].to(torch.float32)
        shifted = row - torch.amax(row, dim=1, keepdim=True)
        e = torch.exp(shifted)
        out[tile_n, :] = (e / torch.sum(e, dim=1, keepdim=True)).to(out.dtype)
    return out


@helion.kernel()
def softmax_online(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    block_m = hl.register_block_size(m)
    block_n = hl.register_block_size(n)
    for tile_m in hl.tile(m, block_size=block_m):
        running_max = hl.full([tile_m], float("-inf"), dtype=torch.float32)
        running_sum = hl.zeros([tile_m], dtype=torch.float32)
        for tile_n in hl.tile(n, block_size=block_n):
            values = x[tile_m, tile_n].to(torch.float32)
            new_max = torch.maximum(running_max, torch.amax(values, dim=1))
            running_sum = running_sum * torch.exp(running_max - new_max) + torch.sum(
                torch.exp(values - new_max[:, None]), dim=1)
            running_max = new_max
        for tile_n in hl.tile(n, block_size=block_n):
            values = x[tile_m, tile_n].to(torch.float32)
            out[tile_m, tile_n] = (torch.exp(values - running_max[:, None]) / running_sum[:, None]).to(out.dtype)
    return out


def check(m: int, n: int) -> None:
    x = torch.randn([m, n], device=DEVICE, dtype=torch.float16)
    kernels = {"helion softmax": softmax, "helion steps": softmax_steps, "helion online": softmax_online}
    run_example(kernels, lambda x: torch.nn.functional.softmax(x, dim=1), (x,))


def main() -> None:
    check(4096, 2560)


if __name__ == "__main__":
    main()
