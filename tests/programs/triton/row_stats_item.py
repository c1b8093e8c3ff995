# Row means with a Triton kernel, then the largest error printed: a script as people paste it.
import torch
import triton
import triton.language as tl


@triton.jit
def row_mean_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0) / n_cols)


@triton.jit
def scale_kernel(x_ptr, s, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * s, mask=mask)


x = torch.randn(4096, 300, device="cuda")
means = torch.empty(4096, device="cuda")
row_mean_kernel[(4096,)](x, means, 300, BLOCK=512)
first_rows = torch.tensor([0, 1, 2, 3], device="cuda")
print(means[first_rows].shape)
err = (means - x.mean(dim=1)).abs().max().item()
print(f"max error {err:.2e}")
scale_kernel[(4,)](means, 2.0, 4096, BLOCK=1024)
