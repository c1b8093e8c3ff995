import torch
import torch.nn as nn


class Net(nn.Module):
    """A small image classifier: conv, pool, conv, pool, two linear layers (irscope's convention)."""

    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(64 * 8 * 8, 256), nn.ReLU(), nn.Linear(256, classes))

    def forward(self, x):
        return self.head(self.features(x))


model = Net().eval()
example_inputs = lambda: (torch.randn(32, 3, 32, 32),)  # noqa: E731
