"""Scaling a matrix with CuTe DSL, its block size picked by cute.testing.autotune_jit on the first
call (retuned when the shape changes), then checked against PyTorch."""
import torch

import cutlass
import cutlass.cute as cute
import cutlass.cute.testing as testing


@cute.kernel
def scale_kernel(gX: cute.Tensor, gY: cute.Tensor, alpha: cutlass.Float32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    i = bidx * bdim + tidx
    gY[i] = gX[i] * alpha


@testing.autotune_jit(params_dict={"threads": [128, 256]}, update_on_change=["n"])
@cute.jit
def scale(mX: cute.Tensor, mY: cute.Tensor, alpha: cutlass.Float32, n: cutlass.Int32,
          threads: cutlass.Constexpr = 128):
    scale_kernel(mX, mY, alpha).launch(grid=(n // threads, 1, 1), block=(threads, 1, 1))


def main():
    for n in (1 << 16, 1 << 20):
        x = torch.randn(n, device="cuda")
        y = torch.empty_like(x)
        scale(x, y, 3.0, n)
        torch.testing.assert_close(y, x * 3.0)
    print("PASS")


if __name__ == "__main__":
    main()
