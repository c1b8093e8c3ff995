"""Sequence parallel: the norm runs on a shard of the sequence, the projections tensor-parallel.
    torchrun --nproc-per-node 4 sp_norm_block.py
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


class NormedMLP(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(self.norm(x))))


def main():
    dist.init_process_group(backend="nccl")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    mesh = init_device_mesh("cuda", (dist.get_world_size(),))
    block = NormedMLP().to(device)
    plan = {
        "norm": SequenceParallel(),
        "up": ColwiseParallel(input_layouts=Shard(1)),
        "down": RowwiseParallel(output_layouts=Shard(1)),
    }
    block = parallelize_module(block, mesh, plan)
    compiled = torch.compile(block)
    x = torch.randn(2, 16, 32, device=device)
    out = compiled(x)
    print("output", tuple(out.shape))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
