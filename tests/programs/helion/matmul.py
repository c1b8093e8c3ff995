"""
Matrix multiplication
=====================
A Helion matmul with an optional epilogue, given its config, and a batched matmul without one.
"""
from __future__ import annotations

from typing import Callable

import torch

import helion
from helion._testing import DEVICE
from helion._testing import run_example
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[64, 64, 32], num_warps=4, num_stages=3), static_shapes=True)
def matmul(x: torch.Tensor, y: torch.Tensor,
           epilogue: Callable[[torch.Tensor, tuple[torch.Tensor, ...]], torch.Tensor] = lambda acc, tile: acc
           ) -> torch.Tensor:
    m, k = x.size()
    k2, n = y.size()
    assert k == k2, f"size mismatch {k} != {k2}"
    out = torch.empty([m, n], dtype=torch.promote_types(x.dtype, y.dtype), device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = epilogue(acc, (tile_m, tile_n))
    return out


@helion.kernel()
def bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    batch, m, k = a.size()
    _, k2, n = b.size()
    assert k == k2
    out = torch.empty([batch, m, n], device=a.device, dtype=torch.promote_types(a.dtype, b.dtype))
    for tile_b, tile_m, tile_n in hl.tile([batch, m, n]):
        acc = hl.zeros([tile_b, tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.baddbmm(acc, a[tile_b, tile_m, tile_k], b[tile_b, tile_k, tile_n])
        out[tile_b, tile_m, tile_n] = acc
    return out


def check(m: int, k: int, n: int) -> None:
    x = torch.randn([m, k], device=DEVICE, dtype=torch.float16)
    y = torch.randn([k, n], device=DEVICE, dtype=torch.float16)
    bias = torch.randn([n], device=DEVICE, dtype=torch.float16)
    run_example(matmul, torch.matmul, (x, y))

    def with_bias(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return matmul(x, y, lambda acc, tile: torch.relu(acc + bias[tile[1]]))

    run_example(with_bias, lambda x, y: torch.relu(x @ y + bias), (x, y))
    a = torch.randn([16, 512, 768], device=DEVICE, dtype=torch.float16)
    b = torch.randn([16, 768, 1024], device=DEVICE, dtype=torch.float16)
    run_example(bmm, torch.bmm, (a, b))


def main() -> None:
    check(1024, 1024, 1024)


if __name__ == "__main__":
    main()
