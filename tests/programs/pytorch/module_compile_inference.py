"""nn.Module.compile() in place, then timed inference with time.perf_counter, as blog posts do."""
import time

import torch
import torch.nn as nn


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(self.pool(x).flatten(1))


def bench(fn, x, n=3):
    start = time.perf_counter()
    for _ in range(n):
        fn(x)
    return (time.perf_counter() - start) / n


if __name__ == "__main__":
    model = ConvNet().eval()
    x = torch.randn(2, 3, 16, 16)
    eager_s = bench(model, x)
    model.compile()
    with torch.no_grad():
        model(x)  # warm-up: compiles
        compiled_s = bench(model, x)
    print(f"eager {eager_s * 1e3:.2f} ms, compiled {compiled_s * 1e3:.2f} ms")
