import torch


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 128)
        self.fc2 = torch.nn.Linear(128, 64)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


# inference: no gradients, so AOTAutograd builds no backward graph
model = Mlp().eval().requires_grad_(False)
example_inputs = (torch.randn(32, 64),)
