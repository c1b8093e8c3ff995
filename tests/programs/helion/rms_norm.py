"""
RMS normalization
=================
RMSNorm forward in Helion, with the reciprocal RMS kept for a backward pass.
"""
from __future__ import annotations

import torch

import helion
from helion._testing import DEVICE
from helion._testing import HALF_DTYPE
from helion._testing import run_example
import helion.language as hl


@helion.kernel()
def rms_norm_fwd(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    assert weight.size(0) == n, f"weight has {weight.size(0)} elements, expected {n}"
    out = torch.empty_like(x)
    inv_rms = torch.empty([m, 1], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(torch.float32)
        r = torch.rsqrt(torch.mean(row * row, dim=-1, keepdim=True) + eps)
        out[tile_m, :] = (row * r * weight[:].to(torch.float32)).to(out.dtype)
        inv_rms[tile_m, :] = r
    return out, inv_rms


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    return rms_norm_fwd(x, weight, eps)[0]


def rms_norm_pytorch(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    x32 = x.to(torch.float32)
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight).to(x.dtype)


def check(m: int, n: int) -> None:
    x = torch.randn([m, n], device=DEVICE, dtype=HALF_DTYPE)
    weight = torch.randn([n], device=DEVICE, dtype=HALF_DTYPE)
    # against the eager reference and the same reference compiled by torch.compile
    baselines = {"torch": rms_norm_pytorch, "compile": torch.compile(rms_norm_pytorch)}
    run_example(rms_norm, baselines, (x, weight, 1e-5))
    # against PyTorch's own module, moved to the device as a model would be
    module = torch.nn.RMSNorm(n, eps=1e-5).to(DEVICE).to(HALF_DTYPE)
    run_example(lambda x: rms_norm(x, module.weight), module, (x,), baseline_name="nn.RMSNorm")


def main() -> None:
    check(2048, 4096)


if __name__ == "__main__":
    main()
