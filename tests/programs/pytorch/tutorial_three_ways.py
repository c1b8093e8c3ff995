"""torch.compile three ways, as a first tutorial shows it: a function, a decorator, a module."""
import torch
import torch.nn as nn


def sin_plus_cos(x, y):
    return torch.sin(x) + torch.cos(y)


compiled_fn = torch.compile(sin_plus_cos)
print(compiled_fn(torch.randn(8, 8), torch.randn(8, 8)).shape)


@torch.compile
def scaled_tanh(x):
    return 2.0 * torch.tanh(x / 2.0)


print(scaled_tanh(torch.randn(16)).sum())


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        return torch.softmax(self.fc(x), dim=-1)


net = Classifier()
compiled_net = torch.compile(net)
print(compiled_net(torch.randn(4, 32)).argmax(dim=-1))
