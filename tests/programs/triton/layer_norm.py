"""
Layer normalization
===================
A fused layer norm: the forward pass in one kernel, the backward pass as a kernel for dx and a
partial reduction of dw and db, wired into autograd.
"""
import torch

import triton
import triton.language as tl

DEVICE = triton.runtime.driver.active.get_active_torch_device()


@triton.jit
def ln_forward(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    X += row * stride
    Y += row * stride
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < N
    x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    centered = tl.where(mask, x - mean, 0.)
    var = tl.sum(centered * centered, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    w = tl.load(W + cols, mask=mask)
    b = tl.load(B + cols, mask=mask)
    tl.store(Y + cols, centered * rstd * w + b, mask=mask)


@triton.jit
def ln_backward_dx(DX, DY, DW, DB, X, W, Mean, Rstd, stride, N, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + row * stride + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = tl.where(mask, (x - mean) * rstd, 0.)
    wdy = tl.where(mask, w * dy, 0.)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    tl.store(DX + row * stride + cols, (wdy - (xhat * c1 + c2)) * rstd, mask=mask)
    tl.store(DW + row * stride + cols, dy * xhat, mask=mask)
    tl.store(DB + row * stride + cols, dy, mask=mask)


class LayerNorm(torch.autograd.Function):

    @staticmethod
    def forward(ctx, x, normalized_shape, weight, bias, eps):
        y = torch.empty_like(x)
        x2 = x.reshape(-1, x.shape[-1])
        M, N = x2.shape
        mean = torch.empty((M, ), dtype=torch.float32, device=x.device)
        rstd = torch.empty((M, ), dtype=torch.float32, device=x.device)
        BLOCK_SIZE = triton.next_power_of_2(N)
        num_warps = min(max(BLOCK_SIZE // 256, 1), 8)
        ln_forward[(M, )](x2, y, weight, bias, mean, rstd, x2.stride(0), N, eps, BLOCK_SIZE=BLOCK_SIZE,
                          num_warps=num_warps)
        ctx.save_for_backward(x, weight, bias, mean, rstd)
        ctx.BLOCK_SIZE, ctx.num_warps = BLOCK_SIZE, num_warps
        return y

    @staticmethod
    def backward(ctx, dy):
        x, w, b, m, v = ctx.saved_tensors
        x2 = x.reshape(-1, x.shape[-1])
        M, N = x2.shape
        dx = torch.empty_like(dy)
        dw_rows = torch.empty((M, N), dtype=torch.float32, device=w.device)
        db_rows = torch.empty((M, N), dtype=torch.float32, device=w.device)
        ln_backward_dx[(M, )](dx, dy, dw_rows, db_rows, x2, w, m, v, x2.stride(0), N, BLOCK_SIZE=ctx.BLOCK_SIZE,
                              num_warps=ctx.num_warps)
        return dx, None, dw_rows.sum(0).to(w.dtype), db_rows.sum(0).to(b.dtype), None


layer_norm = LayerNorm.apply


def test_layer_norm(M, N, dtype, eps=1e-5, device=DEVICE):
    shape = (M, N)
    weight = torch.rand(N, dtype=dtype, device=device, requires_grad=True)
    bias = torch.rand(N, dtype=dtype, device=device, requires_grad=True)
    x = -2.3 + 0.5 * torch.randn(shape, dtype=dtype, device=device)
    dy = .1 * torch.randn_like(x)
    x.requires_grad_(True)
    y_tri = layer_norm(x, (N, ), weight, bias, eps)
    y_ref = torch.nn.functional.layer_norm(x, (N, ), weight, bias, eps).to(dtype)
    y_tri.backward(dy, retain_graph=True)
    dx_tri, dw_tri, db_tri = [t.grad.clone() for t in [x, weight, bias]]
    x.grad, weight.grad, bias.grad = None, None, None
    y_ref.backward(dy, retain_graph=True)
    dx_ref, dw_ref, db_ref = [t.grad.clone() for t in [x, weight, bias]]
    assert torch.allclose(y_tri, y_ref, atol=1e-2, rtol=0)
    assert torch.allclose(dx_tri, dx_ref, atol=1e-2, rtol=0)
    assert torch.allclose(db_tri, db_ref, atol=1e-2, rtol=0)
    assert torch.allclose(dw_tri, dw_ref, atol=1e-2, rtol=0)


test_layer_norm(1151, 2048, torch.float16)
print("layer norm forward and backward match")
