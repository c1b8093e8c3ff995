"""
Converting between layouts
==========================
Transposing a tile in Gluon: loaded in a row-major layout, converted (through shared memory, where
the compiler decides) to a column-major one for a coalesced store.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def transpose_kernel(in_ptr, out_ptr, M, N, BLOCK: gl.constexpr):
    load_layout: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])
    store_layout: gl.constexpr = gl.BlockedLayout([4, 1], [8, 4], [1, 4], [0, 1])
    pid_m = gl.program_id(0)
    pid_n = gl.program_id(1)
    rows = pid_m * BLOCK + gl.arange(0, BLOCK, layout=gl.SliceLayout(1, load_layout))
    cols = pid_n * BLOCK + gl.arange(0, BLOCK, layout=gl.SliceLayout(0, load_layout))
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tile = gl.load(in_ptr + rows[:, None] * N + cols[None, :], mask=mask)
    tile = gl.convert_layout(tile, store_layout)
    rows_s = pid_m * BLOCK + gl.arange(0, BLOCK, layout=gl.SliceLayout(1, store_layout))
    cols_s = pid_n * BLOCK + gl.arange(0, BLOCK, layout=gl.SliceLayout(0, store_layout))
    mask_s = (rows_s[:, None] < M) & (cols_s[None, :] < N)
    gl.store(out_ptr + cols_s[None, :] * M + rows_s[:, None], tile, mask=mask_s)


def transpose(x, BLOCK=64):
    M, N = x.shape
    out = torch.empty((N, M), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(M, BLOCK), triton.cdiv(N, BLOCK))
    transpose_kernel[grid](x, out, M, N, BLOCK, num_warps=4)
    return out


def test_transpose():
    x = torch.randn(1000, 777, device="cuda")
    torch.testing.assert_close(transpose(x), x.t().contiguous(), atol=0, rtol=0)


if __name__ == "__main__":
    test_transpose()
    x = torch.randn(8192, 8192, device="cuda")
    ms = triton.testing.do_bench_cudagraph(lambda: transpose(x))
    print(f"transpose: {ms:.3f} ms, {2 * x.numel() * x.element_size() * 1e-9 / (ms * 1e-3):.0f} GB/s")
