# A ReLU with CuTe DSL, called directly (compiled on first call), then the number of zeros printed.
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack


@cute.kernel
def relu_kernel(gX: cute.Tensor, gY: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * 256 + tidx
    v = gX[i]
    gY[i] = v if v > 0 else v * 0


@cute.jit
def relu(mX: cute.Tensor, mY: cute.Tensor):
    relu_kernel(mX, mY).launch(grid=(cute.size(mX) // 256, 1, 1), block=(256, 1, 1))


x = torch.randn(65536, device="cuda")
y = torch.empty_like(x)
relu(from_dlpack(x), from_dlpack(y))
zeros = int((y == 0).sum().item())
print(f"{zeros} of {x.numel()} are zero")
