"""The optimizer step compiled on its own, as PyTorch's compiled-optimizer recipe does it."""
import torch

model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.SiLU(), torch.nn.Linear(16, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.01))


@torch.compile(fullgraph=False)
def step():
    optimizer.step()


for _ in range(2):
    loss = model(torch.randn(4, 16)).square().mean()
    loss.backward()
    step()
    optimizer.zero_grad()
print("done")
