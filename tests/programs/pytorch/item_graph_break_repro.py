# Repro: .item() inside a compiled function breaks the graph; result compared with eager.
import torch
import torch._dynamo


def clip_by_max(x):
    limit = x.abs().max().item()
    return torch.clamp(x, -limit / 2, limit / 2) * 3


x = torch.randn(10)
expected = clip_by_max(x)
torch._dynamo.reset()
actual = torch.compile(clip_by_max)(x)
torch.testing.assert_close(actual, expected)
print("max abs diff", (actual - expected).abs().max())
