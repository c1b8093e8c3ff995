"""A persistent scale kernel in CuTe DSL: as many CTAs as the GPU keeps resident (asked of
cutlass.utils.HardwareInfo, as CUTLASS's persistent GEMMs do), each striding over the vector; the
torch tensors passed to cute.compile as they are. The grid's size is written back to a word of
device memory the program allocates itself with CUDA Python's runtime."""
import argparse

import cuda.bindings.runtime as cudart
import torch

import cutlass
import cutlass.cute as cute
import cutlass.utils as utils
from cutlass.base_dsl.runtime.cuda import checkCudaErrors


@cute.kernel
def scale_kernel(gX: cute.Tensor, gY: cute.Tensor, alpha: cutlass.Float32, n: cutlass.Int32, gGrid: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    gdim, _, _ = cute.arch.grid_dim()
    for i in cutlass.range(bidx * bdim + tidx, n, gdim * bdim):
        gY[i] = gX[i] * alpha
    if bidx == 0 and tidx == 0:
        gGrid[0] = gdim


@cute.jit
def scale(mX: cute.Tensor, mY: cute.Tensor, alpha: cutlass.Float32, grid_word: cute.Pointer,
          ctas: cutlass.Constexpr):
    threads = 256
    mGrid = cute.make_tensor(grid_word, cute.make_layout(1))
    scale_kernel(mX, mY, alpha, cute.size(mX), mGrid).launch(grid=(ctas, 1, 1), block=(threads, 1, 1))


def run(n: int, alpha: float):
    hardware_info = utils.HardwareInfo()
    sms = hardware_info.get_device_multiprocessor_count()
    max_active_clusters = hardware_info.get_max_active_clusters(1)
    print(f"{sms} SMs, {max_active_clusters} resident CTAs")
    x = torch.randn(n, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    word = checkCudaErrors(cudart.cudaMalloc(4))
    checkCudaErrors(cudart.cudaMemset(word, 0, 4))
    grid_word = cute.runtime.make_ptr(cutlass.Uint32, word, cute.AddressSpace.gmem)
    # torch tensors passed as they are: CuTe adapts them (from_dlpack, every extent dynamic)
    compiled = cute.compile(scale, x, y, alpha, grid_word, max_active_clusters)
    compiled(x, y, alpha, grid_word)
    checkCudaErrors(cudart.cudaDeviceSynchronize())
    torch.testing.assert_close(y, x * alpha)
    checkCudaErrors(cudart.cudaFree(word))
    print("PASS")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="persistent scale with CuTe DSL")
    parser.add_argument("--n", type=int, default=1 << 22)
    parser.add_argument("--alpha", type=float, default=0.5)
    args = parser.parse_args()
    run(args.n, args.alpha)
