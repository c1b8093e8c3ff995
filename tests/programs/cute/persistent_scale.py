"""A persistent scale kernel in CuTe DSL: as many CTAs as the GPU keeps resident (asked of
cutlass.utils.HardwareInfo, as CUTLASS's persistent GEMMs do), each striding over the vector; the
torch tensors passed to cute.compile as they are."""
import argparse

import torch

import cutlass
import cutlass.cute as cute
import cutlass.utils as utils


@cute.kernel
def scale_kernel(gX: cute.Tensor, gY: cute.Tensor, alpha: cutlass.Float32, n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    gdim, _, _ = cute.arch.grid_dim()
    for i in cutlass.range(bidx * bdim + tidx, n, gdim * bdim):
        gY[i] = gX[i] * alpha


@cute.jit
def scale(mX: cute.Tensor, mY: cute.Tensor, alpha: cutlass.Float32, ctas: cutlass.Constexpr):
    threads = 256
    scale_kernel(mX, mY, alpha, cute.size(mX)).launch(grid=(ctas, 1, 1), block=(threads, 1, 1))


def run(n: int, alpha: float):
    hardware_info = utils.HardwareInfo()
    sms = hardware_info.get_device_multiprocessor_count()
    max_active_clusters = hardware_info.get_max_active_clusters(1)
    print(f"{sms} SMs, {max_active_clusters} resident CTAs")
    x = torch.randn(n, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    # torch tensors passed as they are: CuTe adapts them (from_dlpack, every extent dynamic)
    compiled = cute.compile(scale, x, y, alpha, max_active_clusters)
    compiled(x, y, alpha)
    torch.testing.assert_close(y, x * alpha)
    print("PASS")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="persistent scale with CuTe DSL")
    parser.add_argument("--n", type=int, default=1 << 22)
    parser.add_argument("--alpha", type=float, default=0.5)
    args = parser.parse_args()
    run(args.n, args.alpha)
