"""Scaling a vector with CuTe DSL, timed with CUDA events on the current stream, then launched twenty
times from one CUDA graph, and once more on a stream of its own with a launch-completion event (the
raw CUDA event of a torch.cuda.Event) that the next launch waits for. The program checks for a GPU
through CUDA Python's driver API first.
"""
import torch
from cuda.bindings import driver, runtime

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


@cute.jit
def scale_signalled(mX: cute.Tensor, mY: cute.Tensor, alpha: cutlass.Float32, stream: runtime.cudaStream_t,
                    started: runtime.cudaEvent_t):
    threads = 256
    n = cute.size(mX)
    scale_kernel(mX, mY, alpha).launch(grid=(n // threads, 1, 1), block=(threads, 1, 1), stream=stream,
                                       launch_completion_event=started)


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

    side = torch.cuda.Stream()
    started = torch.cuda.Event(enable_timing=False)
    started.record(side)  # PyTorch makes the CUDA event when it is first recorded
    assert started.cuda_event != 0, "torch.cuda.Event was not created"
    with torch.cuda.stream(side):
        scale_signalled(x_, y_, 3.0, runtime.cudaStream_t(side.cuda_stream), runtime.cudaEvent_t(started.cuda_event))
    started.synchronize()
    torch.testing.assert_close(y, x * 3.0)


if __name__ == "__main__":
    main()
