import torch


def model(x):
    y = torch.sin(x)
    y = y * 2.0
    y = y + torch.cos(x)
    return torch.relu(y)


example_inputs = (torch.randn(512, 512),)
