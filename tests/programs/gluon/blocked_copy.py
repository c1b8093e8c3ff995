"""
Copying memory with layouts
===========================
A tiled memcpy in Gluon: the BlockedLayout says which elements each thread holds, and how many
contiguous elements each thread holds decides how wide its loads are.
"""
import pytest
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def memcpy_1d_kernel(in_ptr, out_ptr, xnumel, XBLOCK: gl.constexpr, layout: gl.constexpr):
    pid = gl.program_id(0)
    offsets = pid * XBLOCK + gl.arange(0, XBLOCK, layout=layout)
    mask = offsets < xnumel
    value = gl.load(in_ptr + offsets, mask=mask)
    gl.store(out_ptr + offsets, value, mask=mask)


def memcpy_1d(input, output, XBLOCK, layout, num_warps):
    xnumel = input.numel()
    grid = (triton.cdiv(xnumel, XBLOCK), )
    memcpy_1d_kernel[grid](input, output, xnumel, XBLOCK, layout, num_warps=num_warps)


@pytest.mark.parametrize("xnumel", [1000, 4096])
def test_memcpy_1d(xnumel):
    layout = gl.BlockedLayout(size_per_thread=[1], threads_per_warp=[32], warps_per_cta=[4], order=[0])
    input = torch.randn(xnumel, device="cuda")
    output = torch.empty_like(input)
    memcpy_1d(input, output, 512, layout, num_warps=4)
    torch.testing.assert_close(input, output, atol=0, rtol=0)


if __name__ == "__main__":
    test_memcpy_1d(1000)
    xnumel = 32 << 20
    input = torch.randn(xnumel, device="cuda")
    output = torch.empty_like(input)
    print("size_per_thread  time      throughput")
    for r in [1, 2, 4, 8]:
        XBLOCK = r * 32 * 4
        layout = gl.BlockedLayout(size_per_thread=[r], threads_per_warp=[32], warps_per_cta=[4], order=[0])
        ms = triton.testing.do_bench(lambda: memcpy_1d(input, output, XBLOCK, layout, num_warps=4))
        gbps = 2 * xnumel * input.element_size() * 1e-9 / (ms * 1e-3)
        print(f"{r:>15}  {ms:.3f} ms  {gbps:.1f} GB/s")
