"""Scaling a vector with CuTe DSL, timed with CUDA events on the current stream, then launched twenty
times from one CUDA graph. The program checks for a GPU through CUDA Python's driver API first.
"""
import torch
from cuda.bindings import driver

import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack


@cute.kernel
def scale_kernel(gX: cute.Tensor, gY: cute.Tensor, alpha: cutlass.Float32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    i = bidx * bdim + tidx
    gY[i] = gX[i] * alpha


@cute.jit
def scale(mX: cute.Tensor, mY: cute.Tensor, alpha: cutlass.Float32):
    threads = 128
    n = cute.size(mX)
    scale_kernel(mX, mY, alpha).launch(grid=(n // threads, 1, 1), block=(threads, 1, 1))


def main():
    driver.cuInit(0)
    err, count = driver.cuDeviceGetCount()
    if err != driver.CUresult.CUDA_SUCCESS or count < 1:
        raise RuntimeError("this example needs a GPU")
    cutlass.cuda.initialize_cuda_context()
    n = 1 << 20
    x = torch.randn(n, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    x_, y_ = from_dlpack(x), from_dlpack(y)
    compiled = cute.compile(scale, x_, y_, 2.0)
    stream = torch.cuda.current_stream()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(stream)
    for _ in range(20):
        compiled(x_, y_, 2.0)
    end.record(stream)
    end.synchronize()
    print(f"{start.elapsed_time(end) / 20 * 1000:.1f} us per launch")
    assert torch.allclose(y, x * 2.0)

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(20):
            compiled(x_, y_, 2.0)
    graph.replay()
    cutlass.cuda.stream_sync(cutlass.cuda.default_stream())


if __name__ == "__main__":
    main()
