"""An FP8 copy in CuTe DSL, written the way CUTLASS's examples write it: the FP8 data lives in uint8
torch tensors (DLPack has no FP8 type) and is retyped on the CuTe side, the block size is autotuned
with cutlass.testing.tune, the chosen kernel benchmarked with cutlass.testing.benchmark."""
import argparse

import torch

import cutlass
import cutlass.cute as cute
import cutlass.testing as testing
from cutlass.cute.runtime import from_dlpack


@cute.kernel
def copy_kernel(gSrc: cute.Tensor, gDst: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    i = bidx * bdim + tidx
    gDst[i] = gSrc[i]


@cute.jit
def fp8_copy(mSrc: cute.Tensor, mDst: cute.Tensor, threads: cutlass.Constexpr):
    n = cute.size(mSrc)
    copy_kernel(mSrc, mDst).launch(grid=(n // threads, 1, 1), block=(threads, 1, 1))


def as_fp8(storage: torch.Tensor) -> cute.Tensor:
    view = from_dlpack(storage, assumed_align=16)
    view.element_type = cutlass.Float8E4M3FN
    return view


def main():
    parser = argparse.ArgumentParser(description="FP8 copy, autotuned")
    parser.add_argument("--n", type=int, default=1 << 20)
    args = parser.parse_args()

    src = torch.randint(0, 255, (args.n,), dtype=torch.uint8, device="cuda")
    dst = torch.zeros_like(src)
    src_fp8, dst_fp8 = as_fp8(src), as_fp8(dst)

    def configured(threads=128):
        compiled = cute.compile(fp8_copy, src_fp8, dst_fp8, threads)
        return lambda: compiled(src_fp8, dst_fp8)

    best = testing.tune(configured, params_dict={"threads": [128, 256]})
    print("best config:", best)
    compiled = cute.compile(fp8_copy, src_fp8, dst_fp8, best["threads"])
    us = testing.benchmark(compiled, kernel_arguments=testing.JitArguments(src_fp8, dst_fp8))
    print(f"{us:.1f} us per copy")
    assert torch.equal(src, dst), "the copy differs"


if __name__ == "__main__":
    main()
