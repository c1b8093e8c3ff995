import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * row_stride + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * row_stride + offs, num / tl.sum(num, axis=0), mask=mask)


x = torch.randn(4096, 781, device="cuda")
out = torch.empty_like(x)
softmax_kernel[(x.shape[0],)](out, x, x.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
print(out.shape)
