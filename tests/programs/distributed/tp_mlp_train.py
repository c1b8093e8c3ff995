"""Tensor-parallel MLP trained for a few steps, started with
    torchrun --nproc-per-node 4 tp_mlp_train.py
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class FeedForward(nn.Module):
    def __init__(self, width=64, hidden=256):
        super().__init__()
        self.w_in = nn.Linear(width, hidden)
        self.act = nn.GELU()
        self.w_out = nn.Linear(hidden, width)

    def forward(self, x):
        return self.w_out(self.act(self.w_in(x)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()

    dist.init_process_group("nccl")
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    mesh = init_device_mesh("cuda", (world,))

    model = parallelize_module(FeedForward().cuda(), mesh, {"w_in": ColwiseParallel(), "w_out": RowwiseParallel()})
    model = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    for step in range(args.steps):
        torch.manual_seed(step)
        x = torch.randn(args.batch, 64, device="cuda")
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        if rank == 0:
            print(f"step {step}: loss {loss.item():.4f}")

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
