import torch
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, SequenceParallel,
                                               parallelize_module)


class Block(nn.Module):
    def __init__(self, dim=256):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(self.norm(x))))


mesh = init_device_mesh("cpu", (8,))
# The LayerNorm runs on a slice of the sequence; the MLP is tensor parallel. Activations move
# from sequence-sharded to replicated (all-gather) before up, and back (reduce-scatter) after down.
model = parallelize_module(Block(), mesh, {
    "norm": SequenceParallel(),
    "up": ColwiseParallel(input_layouts=Shard(1)),
    "down": RowwiseParallel(output_layouts=Shard(1)),
})
example_inputs = (torch.randn(4, 64, 256),)
