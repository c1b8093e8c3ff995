"""
Element-wise kernels
====================
Addition with broadcasting, a leaky ReLU in half precision, and a fused SiLU-and-multiply (the SwiGLU
gate), each checked against PyTorch; the gate's forward and backward through autograd.
"""
from __future__ import annotations

import torch

import helion
from helion._testing import DEVICE
from helion._testing import HALF_DTYPE
from helion._testing import run_example
import helion.language as hl


@helion.kernel()
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x, y = torch.broadcast_tensors(x, y)
    out = torch.empty(x.shape, dtype=torch.promote_types(x.dtype, y.dtype), device=x.device)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


@helion.kernel()
def leaky_relu(x: torch.Tensor, negative_slope: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = torch.where(x[tile] > 0, x[tile], x[tile] * negative_slope)
    return out


@helion.kernel()
def swiglu_fwd(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    for tile in hl.tile(a.size()):
        a32 = a[tile].to(torch.float32)
        out[tile] = (a32 * torch.sigmoid(a32)).to(a.dtype) * b[tile]
    return out


@helion.kernel()
def swiglu_bwd(grad: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    da = torch.empty_like(a)
    db = torch.empty_like(b)
    for tile in hl.tile(a.size()):
        a32 = a[tile].to(torch.float32)
        g = grad[tile].to(torch.float32)
        s = torch.sigmoid(a32)
        silu = a32 * s
        db[tile] = (g * silu).to(b.dtype)
        da[tile] = (g * b[tile].to(torch.float32) * (s + silu * (1 - s))).to(a.dtype)
    return da, db


class SwiGLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):  # noqa: ANN001, ANN205
        ctx.save_for_backward(a, b)
        return swiglu_fwd(a, b)

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        a, b = ctx.saved_tensors
        return swiglu_bwd(grad, a, b)


def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return SwiGLU.apply(a, b)


def main() -> None:
    x = torch.randn([1024, 1024], device=DEVICE, dtype=HALF_DTYPE)
    y = torch.randn([1024], device=DEVICE, dtype=HALF_DTYPE)
    run_example(add, torch.add, (x, y))
    run_example(leaky_relu, torch.nn.functional.leaky_relu, (x, 0.01))
    a = torch.randn([2048, 1024], device=DEVICE, dtype=HALF_DTYPE, requires_grad=True)
    b = torch.randn([2048, 1024], device=DEVICE, dtype=HALF_DTYPE, requires_grad=True)
    run_example(swiglu, lambda a, b: torch.nn.functional.silu(a) * b, (a, b), bwd=True)


if __name__ == "__main__":
    main()
