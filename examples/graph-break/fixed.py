import torch

# The fix: Dynamo may move print calls to after the graph instead of breaking it.
torch._dynamo.config.reorderable_logging_functions.add(print)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(32, 32)

    def forward(self, x):
        h = torch.relu(self.lin(x))
        print("hidden norm", h.norm())
        return torch.softmax(h, dim=-1)


model = Net()
example_inputs = (torch.randn(8, 32),)
