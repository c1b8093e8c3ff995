"""
Sequence parallel training of a toy feed-forward layer, Megatron-LM style: every rank holds a
different slice of the sequence; the first projection is split by column and gathers the slices
(all-gather), the second is split by row and hands each rank its slice of the sum back
(reduce-scatter).

Launch with:
    torchrun --nnodes 1 --nproc-per-node 4 sequence_parallel_train.py --iters 3
"""
import argparse
import logging
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

logging.basicConfig(format="%(asctime)s %(message)s", level=logging.INFO)
logger = logging.getLogger(__name__)

MIN_GPUS = 2
if torch.cuda.device_count() < MIN_GPUS:
    print(f"this example needs {MIN_GPUS} GPUs, found {torch.cuda.device_count()}; exiting")
    sys.exit(0)


def log_on_rank0(rank, message):
    if rank == 0:
        logger.info(message)


class FeedForward(nn.Module):
    def __init__(self, width=48, hidden=192):
        super().__init__()
        self.w_in = nn.Linear(width, hidden, bias=False)
        self.w_out = nn.Linear(hidden, width, bias=False)

    def forward(self, tokens):
        return self.w_out(F.silu(self.w_in(tokens)))


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--seq", type=int, default=32, help="tokens per rank")
    parser.add_argument("--lr", type=float, default=3e-3)
    return parser.parse_args()


def main():
    args = parse_args()
    world = int(os.environ.get("WORLD_SIZE", torch.cuda.device_count()))
    mesh = init_device_mesh("cuda", (world,))
    rank = mesh.get_rank()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    log_on_rank0(rank, f"device mesh: {mesh}")

    torch.manual_seed(0)  # the same weights on every rank before they are split
    layer = FeedForward().to("cuda")
    layer = parallelize_module(layer, mesh, {
        "w_in": ColwiseParallel(input_layouts=Shard(0)),   # sequence slices in, gathered
        "w_out": RowwiseParallel(output_layouts=Shard(0)),  # partial sums out, scattered
    })
    layer = torch.compile(layer)
    optimizer = torch.optim.AdamW(layer.parameters(), lr=args.lr, foreach=True)

    torch.manual_seed(rank)  # each rank its own slice of the sequence
    for step in range(args.iters):
        tokens = torch.rand(args.seq, 48, device="cuda")
        loss = layer(tokens).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        log_on_rank0(rank, f"step {step}: loss {loss.item():.4f}")

    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
