import torch


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 64)
        self.fc2 = torch.nn.Linear(64, 32)

    def forward(self, x):
        h = self.fc1(x)
        h = torch.sin(h) * torch.cos(h) + h
        return self.fc2(torch.relu(h))


model = Mlp()
example_inputs = (torch.randn(16, 32),)
