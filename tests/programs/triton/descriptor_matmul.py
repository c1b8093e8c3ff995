"""
Matmul with tensor descriptors
==============================
On Hopper, loads through host-side tensor descriptors (TMA). The descriptors are made once with a
placeholder block shape; each autotune config's pre_hook sets the block shape it needs. Benchmarked
with do_bench, then profiled with Triton's profiler against cuBLAS.
"""
import torch

import triton
import triton.language as tl
import triton.profiler as proton
from triton.tools.tensor_descriptor import TensorDescriptor

DEVICE = triton.runtime.driver.active.get_active_torch_device()


def supports_host_descriptor():
    return torch.cuda.get_device_capability()[0] >= 9


def set_block_shapes(nargs):
    BLOCK_M, BLOCK_N, BLOCK_K = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [BLOCK_M, BLOCK_K]
    nargs["b_desc"].block_shape = [BLOCK_N, BLOCK_K]
    nargs["c_desc"].block_shape = [BLOCK_M, BLOCK_N]


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, num_stages=3, num_warps=8,
                      pre_hook=set_block_shapes),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64}, num_stages=4, num_warps=4,
                      pre_hook=set_block_shapes),
    ],
    key=["M", "N", "K"],
)
@triton.jit
def matmul_tma_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([off_n, k * BLOCK_K])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([off_m, off_n], acc.to(tl.float16))


def matmul_tma(a, b):
    M, K = a.shape
    N, K2 = b.shape
    assert K == K2
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    dummy = [1, 1]
    a_desc = TensorDescriptor(a, a.shape, a.stride(), dummy)
    b_desc = TensorDescriptor(b, b.shape, b.stride(), dummy)
    c_desc = TensorDescriptor(c, c.shape, c.stride(), dummy)
    grid = lambda META: (triton.cdiv(M, META["BLOCK_M"]), triton.cdiv(N, META["BLOCK_N"]))
    matmul_tma_kernel[grid](a_desc, b_desc, c_desc, M, N, K)
    return c


if __name__ == "__main__":
    if not supports_host_descriptor():
        raise SystemExit("host tensor descriptors need Hopper or newer")
    a = torch.randn((1024, 512), device=DEVICE, dtype=torch.float16)
    b = torch.randn((2048, 512), device=DEVICE, dtype=torch.float16)  # N x K: the kernel reads b transposed
    c = matmul_tma(a, b)
    torch.testing.assert_close(c, a @ b.T, atol=1e-2, rtol=1e-2)
    from triton._C.libtriton import nvidia
    workspace = torch.empty(32 * 1024 * 1024, device="cuda", dtype=torch.uint8)
    cublas = nvidia.cublas.CublasLt(workspace)
    c_ref = torch.empty_like(c)
    providers = [("triton", lambda: matmul_tma(a, b)), ("cublas", lambda: cublas.matmul(a, b, c_ref))]
    for name, fn in providers:
        ms = triton.testing.do_bench(fn)
        print(f"{name}: {2 * 1024 * 2048 * 512 * 1e-12 / (ms * 1e-3):.1f} TFLOPS")

    # the same two under Triton's profiler, then its table of the profile
    proton.start("matmul_tma", hook="triton")
    for name, fn in providers:
        for _ in range(10):
            with proton.scope(f"{name} [M=1024, N=2048, K=512]", {"flops": 2 * 1024 * 2048 * 512}):
                fn()
    proton.finalize()
    import triton.profiler.viewer as proton_viewer
    tree, metrics = proton_viewer.parse(["time/ms", "tflop/s"], "matmul_tma.hatchet")
    proton_viewer.print_tree(tree, metrics)
