"""The `gluon` language: Triton's lower-level kernel language (`triton.experimental.gluon`),
`@gluon.jit` kernels whose layouts the author writes out (`gl.BlockedLayout`, slices, shared
layouts). A Gluon kernel enters Triton's compiler at TTGIR (no TTIR: the layouts are the user's)
and is compiled, captured and launched by the same run as a `@triton.jit` one
(compiler/kernels/program.py), with its own example, markers and spare imports."""
from __future__ import annotations

from compiler.kernels.program import PREWARM_MODULES, TARGET_OPTION, TritonProgramPipeline

EXAMPLE = '''\
import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def softmax_kernel(out_ptr, in_ptr, row_stride, n_cols, BLOCK: gl.constexpr):
    # the layout is written out: each thread holds 4 neighbouring columns, a warp 128, the 4 warps 512
    layout: gl.constexpr = gl.BlockedLayout(size_per_thread=[4], threads_per_warp=[32], warps_per_cta=[4],
                                            order=[0])
    row = gl.program_id(0)
    offs = gl.arange(0, BLOCK, layout=layout)
    mask = offs < n_cols
    x = gl.load(in_ptr + row * row_stride + offs, mask=mask, other=-float("inf"))
    x = x - gl.max(x, axis=0)
    num = gl.exp(x)
    gl.store(out_ptr + row * row_stride + offs, num / gl.sum(num, axis=0), mask=mask)


x = torch.randn(4096, 781, device="cuda")
out = torch.empty_like(x)
softmax_kernel[(x.shape[0],)](out, x, x.stride(0), x.shape[1], BLOCK=1024, num_warps=4)
print(out.shape)
'''



class GluonPipeline(TritonProgramPipeline):
    key = "gluon"
    title = "Gluon"
    accepts = ("`@gluon.jit` kernels (`triton.experimental.gluon`, the layouts written out) and the Python that "
               "launches them")
    source_markers = ("@gluon.jit",)
    example = EXAMPLE
    kernel_group = "Gluon"
    no_kernel = ("the program compiled no Gluon kernel: launch one with kernel[grid](...) on CUDA tensors or "
                 "compile one with kernel.warmup(...)")
    options = (TARGET_OPTION,)
    prewarm_modules = (*PREWARM_MODULES, "triton.experimental.gluon",
                       "triton.experimental.gluon.language")
