"""FSDP2 on CPU ranks (gloo): the model sharded with fully_shard, compiled, one training step.
    torchrun --nproc-per-node 4 fsdp2_stack.py
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


class Stack(nn.Module):
    def __init__(self, width=32, depth=2):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.head = nn.Linear(width, 4)

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return self.head(x)


def main():
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (int(os.environ["WORLD_SIZE"]),))
    model = Stack()
    fully_shard(model, mesh=mesh, reshard_after_forward=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model = torch.compile(model)
    x = torch.randn(8, 32)
    target = torch.randint(0, 4, (8,))
    loss = nn.functional.cross_entropy(model(x), target)
    loss.backward()
    optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
