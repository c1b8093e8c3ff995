"""FP8 operands and a TVM FFI launch in CuTe DSL, set up the way CUTLASS's GEMM examples set up
theirs: the FP8 matrix made with cutlass.torch.matrix and cute_tensor_like (the FP8 values written
by CuTe's own conversion kernel), an FP16 activation with a compact dynamic shape whose extent is a
multiple of 8, and the scaling kernel compiled for TVM FFI and called with the torch tensors.

    python fp8_operands_tvm_ffi.py --m 1024 --k 512
"""
import argparse

import torch

import cutlass
import cutlass.cute as cute
import cutlass.torch as cutlass_torch
from cutlass.cute.runtime import from_dlpack


@cute.kernel
def copy_kernel(gSrc: cute.Tensor, gDst: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    i = bidx * bdim + tidx
    gDst[i] = gSrc[i]


@cute.jit
def fp8_copy(mSrc: cute.Tensor, mDst: cute.Tensor):
    threads = 128
    n = cute.size(mSrc)
    copy_kernel(mSrc, mDst).launch(grid=(n // threads, 1, 1), block=(threads, 1, 1))


@cute.kernel
def scale_kernel(gX: cute.Tensor, gY: cute.Tensor, alpha: cutlass.Float32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    i = bidx * bdim + tidx
    m, k = gX.shape
    row, col = i // k, i % k
    gY[row, col] = (gX[row, col].to(cutlass.Float32) * alpha).to(cutlass.Float16)


@cute.jit
def scale(mX: cute.Tensor, mY: cute.Tensor, alpha: cutlass.Float32):
    threads = 256
    m, k = mX.shape
    scale_kernel(mX, mY, alpha).launch(grid=((m * k) // threads, 1, 1), block=(threads, 1, 1))


def compact(t: torch.Tensor) -> cute.Tensor:
    # the inner extent is a runtime value, a multiple of 8 (16 bytes of FP16)
    return (from_dlpack(t, assumed_align=16)
            .mark_layout_dynamic(leading_dim=1)
            .mark_compact_shape_dynamic(mode=1, stride_order=t.dim_order(), divisibility=8))


def run(m: int, k: int):
    if not torch.cuda.is_available():
        raise RuntimeError("GPU is required to run this example!")
    a_ref = cutlass_torch.matrix(1, m, k, False, cutlass.Float8E4M3FN)
    a, a_torch = cutlass_torch.cute_tensor_like(a_ref, cutlass.Float8E4M3FN, is_dynamic_layout=True,
                                                assumed_align=16)
    b, b_torch = cutlass_torch.cute_tensor_like(a_ref, cutlass.Float8E4M3FN, is_dynamic_layout=True,
                                                assumed_align=16)
    copy = cute.compile(fp8_copy, a, b)
    copy(a, b)
    torch.testing.assert_close(b_torch.view(torch.uint8), a_torch.view(torch.uint8))

    x = torch.randn(m, k, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    scaled = cute.compile(scale, compact(x), compact(y), 0.5, options="--enable-tvm-ffi")
    scaled(x, y, 0.5)
    torch.testing.assert_close(y, x * 0.5)
    print("PASS")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="FP8 operands and a TVM FFI launch")
    parser.add_argument("--m", type=int, default=1024)
    parser.add_argument("--k", type=int, default=512)
    args = parser.parse_args()
    run(args.m, args.k)
