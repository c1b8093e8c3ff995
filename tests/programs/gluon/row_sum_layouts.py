"""
Reductions and slice layouts
============================
Summing the rows of a matrix in Gluon: a 2D BlockedLayout for the tile, and the SliceLayout the
reduction leaves behind for the result.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


def is_hopper_or_newer():
    target = triton.runtime.driver.active.get_current_target()
    return target.backend == "cuda" and torch.cuda.get_device_capability()[0] >= 9


@gluon.jit
def row_sum_kernel(x_ptr, out_ptr, M, N, stride_m, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                   WARPS: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout(size_per_thread=[1, 4], threads_per_warp=[4, 8],
                                            warps_per_cta=[WARPS, 1], order=[1, 0])
    rows_layout: gl.constexpr = gl.SliceLayout(1, layout)
    cols_layout: gl.constexpr = gl.SliceLayout(0, layout)
    pid = gl.program_id(0)
    rows = pid * BLOCK_M + gl.arange(0, BLOCK_M, layout=rows_layout)
    acc = gl.zeros([BLOCK_M], gl.float32, layout=rows_layout)
    for start in range(0, N, BLOCK_N):
        cols = start + gl.arange(0, BLOCK_N, layout=cols_layout)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        tile = gl.load(x_ptr + rows[:, None] * stride_m + cols[None, :], mask=mask, other=0.0)
        acc += gl.sum(tile.to(gl.float32), axis=1)
    gl.store(out_ptr + rows, acc, mask=rows < M)


def row_sum(x, BLOCK_M=32, BLOCK_N=128, num_warps=4):
    M, N = x.shape
    out = torch.empty(M, device=x.device, dtype=torch.float32)
    row_sum_kernel[(triton.cdiv(M, BLOCK_M), )](x, out, M, N, x.stride(0), BLOCK_M, BLOCK_N, num_warps,
                                                  num_warps=num_warps)
    return out


if __name__ == "__main__":
    if not is_hopper_or_newer():
        raise RuntimeError("this tutorial is written for Hopper or newer")
    x = torch.randn(8192, 1000, device="cuda", dtype=torch.float16)
    out = row_sum(x)
    torch.testing.assert_close(out, x.float().sum(dim=1), atol=1e-2, rtol=1e-2)
    for num_warps in (4, 8):
        ms = triton.testing.do_bench(lambda: row_sum(x, num_warps=num_warps))
        print(f"num_warps={num_warps}: {ms:.3f} ms")
