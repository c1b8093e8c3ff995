import torch


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(64, 10)

    def forward(self, x):
        return torch.log_softmax(self.fc(x), dim=-1)


# inference: no gradients, so no backward graph is compiled
model = Head().eval().requires_grad_(False)
example_inputs = (torch.randn(16, 64),)
