import torch


def model(x):
    return torch.nn.functional.gelu(x) * 2


example_inputs = (torch.randn(8, 16),)

# Three batch sizes through one compiled function (backend="eager": Dynamo only).
compiled = torch.compile(model, backend="eager")
for rows in (8, 16, 32):
    compiled(torch.randn(rows, 16))
