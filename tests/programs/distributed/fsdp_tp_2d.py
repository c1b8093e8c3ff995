"""2-D parallel on CPU ranks (gloo): tensor parallel in pairs, FSDP2 across the data-parallel dim.
    torchrun --nproc-per-node 4 fsdp_tp_2d.py
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

TP = 2


class Expert(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.gate = nn.Linear(dim, 2 * dim, bias=False)
        self.proj = nn.Linear(2 * dim, dim, bias=False)

    def forward(self, x):
        return self.proj(nn.functional.silu(self.gate(x)))


def main():
    world_size = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (world_size // TP, TP), mesh_dim_names=("dp", "tp"))
    model = Expert()
    parallelize_module(model, mesh["tp"], {"gate": ColwiseParallel(), "proj": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    model = torch.compile(model)
    out = model(torch.randn(4, 32))
    out.sum().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
