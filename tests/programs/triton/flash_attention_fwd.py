"""
Fused attention, forward only
=============================
A small flash-attention forward (online softmax over key/value blocks), checked against PyTorch's
scaled_dot_product_attention; run it with --seq-len and --head-dim to try other shapes.
"""
import argparse
import math

import torch
import torch.nn.functional as F

import triton
import triton.language as tl

DEVICE = triton.runtime.driver.active.get_active_torch_device()


def is_hopper():
    return torch.cuda.get_device_capability()[0] == 9


@triton.jit
def attn_fwd(Q, K, V, Out, sm_scale, stride_h, stride_m, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    head = tl.program_id(1)
    base = head * stride_h
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * stride_m + offs_d[None, :])
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    for start_n in range(0, N_CTX, BLOCK_N):
        k = tl.load(K + base + (start_n + offs_n)[None, :] * stride_m + offs_d[:, None])
        qk = tl.dot(q, k) * qk_scale
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + (start_n + offs_n)[:, None] * stride_m + offs_d[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(Out + base + offs_m[:, None] * stride_m + offs_d[None, :], acc.to(Out.type.element_ty))


def attention(q, k, v):
    batch, heads, n_ctx, head_dim = q.shape
    o = torch.empty_like(q)
    BLOCK_M = 128 if is_hopper() else 64
    grid = (triton.cdiv(n_ctx, BLOCK_M), batch * heads)
    attn_fwd[grid](q, k, v, o, 1.0 / math.sqrt(head_dim), q.stride(1), q.stride(2), n_ctx, HEAD_DIM=head_dim,
                   BLOCK_M=BLOCK_M, BLOCK_N=64, num_warps=4, num_stages=2)
    return o


def main():
    parser = argparse.ArgumentParser(description="flash attention forward")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--head-dim", type=int, default=64)
    args = parser.parse_args()
    shape = (args.batch, args.heads, args.seq_len, args.head_dim)
    q, k, v = (torch.randn(shape, device=DEVICE, dtype=torch.float16) for _ in range(3))
    out = attention(q, k, v)
    ref = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, ref, atol=2e-2, rtol=0)
    ms = triton.testing.do_bench(lambda: attention(q, k, v))
    flops = 4 * args.batch * args.heads * args.seq_len * args.seq_len * args.head_dim
    print(f"{flops * 1e-12 / (ms * 1e-3):.1f} TFLOPS")


if __name__ == "__main__":
    main()
