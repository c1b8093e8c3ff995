import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # 128 x 128 fp32: 64 KiB of registers a block
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk)[None, :] * stride_ak)
        b = tl.load(b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :] * stride_bn)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(tl.float16))


M = N = 512
K = 256
a = torch.randn(M, K, device="cuda", dtype=torch.float16)
b = torch.randn(K, N, device="cuda", dtype=torch.float16)
c = torch.empty(M, N, device="cuda", dtype=torch.float16)
grid = (M // 128, N // 128)
args = (a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride())
# 1. as Triton and ptxas choose: 4 warps, as many registers as the accumulator needs
matmul_kernel[grid](*args, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64)
# 2. twice the warps: the same tile over 256 threads, fewer registers each
matmul_kernel[grid](*args, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8)
# 3. held to 96 registers a thread: ptxas spills what does not fit to local memory
matmul_kernel[grid](*args, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, maxnreg=96)
