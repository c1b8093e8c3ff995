"""Element-wise addition with CuTe DSL: one thread per element, compiled once with cute.compile and
checked against PyTorch.

    python elementwise_add.py --M 2048 --N 2048 --benchmark
"""
import argparse

import torch

import cutlass
import cutlass.cute as cute
import cutlass.cute.testing as testing
from cutlass.cute.runtime import from_dlpack


@cute.kernel
def naive_add_kernel(gA: cute.Tensor, gB: cute.Tensor, gC: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    idx = bidx * bdim + tidx
    m, n = gA.shape
    row = idx // n
    col = idx % n
    gC[row, col] = gA[row, col] + gB[row, col]


@cute.jit
def naive_add(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor):
    threads = 256
    m, n = mA.shape
    naive_add_kernel(mA, mB, mC).launch(grid=((m * n) // threads, 1, 1), block=(threads, 1, 1))


def run(M, N, benchmark=False, warmup_iterations=2, iterations=100):
    if not torch.cuda.is_available():
        raise RuntimeError("an NVIDIA GPU is required to run this example")
    print(f"Running element-wise add on {M}x{N} float16")
    a = torch.randn(M, N, device="cuda", dtype=torch.float16)
    b = torch.randn(M, N, device="cuda", dtype=torch.float16)
    c = torch.zeros(M, N, device="cuda", dtype=torch.float16)
    a_, b_, c_ = [from_dlpack(t, assumed_align=16).mark_layout_dynamic() for t in (a, b, c)]
    compiled = cute.compile(naive_add, a_, b_, c_)
    compiled(a_, b_, c_)
    torch.testing.assert_close(c, a + b)
    print("Results verified")
    if benchmark:
        avg_us = testing.benchmark(compiled, kernel_arguments=testing.JitArguments(a_, b_, c_),
                                   warmup_iterations=warmup_iterations, iterations=iterations)
        print(f"average time: {avg_us:.2f} us")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="element-wise add with CuTe DSL")
    parser.add_argument("--M", default=1024, type=int)
    parser.add_argument("--N", default=1024, type=int)
    parser.add_argument("--benchmark", action="store_true")
    args = parser.parse_args()
    run(args.M, args.N, benchmark=True)
    print("PASS")
