import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def softmax_kernel(out_ptr, in_ptr, row_stride, n_cols, BLOCK: gl.constexpr):
    # one column per thread: a warp holds 32, the 4 warps 128, and the tile wraps around them 8 times
    layout: gl.constexpr = gl.BlockedLayout(size_per_thread=[1], threads_per_warp=[32], warps_per_cta=[4],
                                            order=[0])
    row = gl.program_id(0)
    offs = gl.arange(0, BLOCK, layout=layout)
    mask = offs < n_cols
    x = gl.load(in_ptr + row * row_stride + offs, mask=mask, other=-float("inf"))
    x = x - gl.max(x, axis=0)
    num = gl.exp(x)
    gl.store(out_ptr + row * row_stride + offs, num / gl.sum(num, axis=0), mask=mask)


x = torch.randn(4096, 1024, device="cuda")
out = torch.empty_like(x)
softmax_kernel[(x.shape[0],)](out, x, x.stride(0), x.shape[1], BLOCK=1024, num_warps=4)
print(out.shape)
