"""Scaling a vector with CuTe DSL's experimental API (`cutlass.cute.experimental`, as CUTLASS's
cute_ext examples are written): the @cute.experimental.jit function called directly on tensors
from from_dlpack, then checked against PyTorch.

    python scale_experimental.py --n 1048576
"""
import argparse

import torch

from cutlass import cute
from cutlass.cute.runtime import from_dlpack


@cute.experimental.kernel
def scale_kernel(gX: cute.Tensor, gY: cute.Tensor, alpha: cute.Float32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    i = bidx * bdim + tidx
    gY[i] = gX[i] * alpha


@cute.experimental.jit
def scale(x: cute.Tensor, y: cute.Tensor, alpha: cute.Float32):
    threads = 256
    scale_kernel(x, y, alpha).launch(grid=(cute.size(x) // threads, 1, 1), block=(threads, 1, 1))


def main():
    parser = argparse.ArgumentParser(description="y = alpha * x with CuTe's experimental API")
    parser.add_argument("--n", type=int, default=1 << 20)
    args = parser.parse_args()
    x = torch.randn(args.n, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    scale(from_dlpack(x, assumed_align=16), from_dlpack(y, assumed_align=16), cute.Float32(2.0))
    torch.testing.assert_close(y, x * 2.0)
    print("PASS")


if __name__ == "__main__":
    main()
