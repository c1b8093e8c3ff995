import torch


def model(a, b):
    spd = a @ a.mT + torch.eye(a.shape[-1])
    return torch.linalg.solve(spd, b).relu()


example_inputs = (torch.randn(16, 16), torch.randn(16, 4))
