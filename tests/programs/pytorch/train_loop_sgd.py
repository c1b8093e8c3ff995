"""A small training loop: compiled model, SGD, loss printed every few steps."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class TwoLayer(nn.Module):
    def __init__(self, d_in=20, d_hidden=32, n_classes=3):
        super().__init__()
        self.hidden = nn.Linear(d_in, d_hidden)
        self.out = nn.Linear(d_hidden, n_classes)

    def forward(self, x):
        return self.out(F.relu(self.hidden(x)))


def main():
    parser = argparse.ArgumentParser(description="train a tiny classifier")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()

    torch.manual_seed(0)
    data = torch.randn(64, 20)
    labels = torch.randint(0, 3, (64,))
    model = TwoLayer()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    model = torch.compile(model)
    for epoch in range(args.epochs):
        for i in range(0, 64, 16):
            opt.zero_grad()
            loss = F.cross_entropy(model(data[i:i + 16]), labels[i:i + 16])
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
