#!/usr/bin/env python3
"""Compile time against world size: a tensor-parallel MLP (`parallelize_module`, ColwiseParallel then
RowwiseParallel) as rank 0 of 2, 8 and 64 ranks (option `devices`), beside the same MLP unsharded
on one rank, each job in a fresh process as a worker runs it (no sandbox, no spare: imports
included), on the host CPU or a virtual GPU.

    .venv/bin/python bench/distributed_world_size.py [--repeats 3] [--target host|cuda:sm_90]

Prints per world size the median job wall time with its range, the median of PyTorch's own
compile time (Dynamo + AOTAutograd + Inductor, from the job's compile timings), and the ratio of
both to the one-rank job's. Rank 0 alone is compiled, so neither should grow with the world: what
grows is the fake group's setup and the mesh's layout (one process group per mesh dimension).
Measured on this host's CPU; nothing runs on a GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = __file__.rsplit("/bench/", 1)[0]

MLP = '''\
import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self, dim=512):
        super().__init__()
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


'''
SHARDED = MLP + '''\
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

mesh = init_device_mesh("{device}", ({n},))
model = parallelize_module(MLP(), mesh, {{"up": ColwiseParallel(), "down": RowwiseParallel()}})
example_inputs = (torch.randn(64, 512),)
'''
SINGLE = MLP + '''\
model = MLP().to("{device}") if "{device}" == "cuda" else MLP()
example_inputs = (torch.randn(64, 512),)
'''


def run_one(source: str, options: dict, out: str) -> None:
    """Child side: one job, as the worker runs it; its bundle in `out`."""
    from testbed.bundle_jobs import run_job
    run_job("pytorch", source, options, out)


def job(n: int, target: str) -> tuple[float, float, int]:
    """(job wall seconds, PyTorch's compile seconds, collectives found) of one job in a fresh process."""
    device = "cpu" if target == "host" else "cuda"
    source = SHARDED.format(device=device, n=n) if n > 1 else SINGLE.format(device=device)
    options = {"target": target, "devices": n}
    if n == 1:
        options["run"] = "compile-only"  # as the sharded jobs are
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--one", source, json.dumps(options), out], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - started
        with open(os.path.join(out, "error.json")) as f:
            error = json.load(f)
        if error:
            raise SystemExit(f"{n} ranks: {error['message']}")
        with open(os.path.join(out, "bundle", "manifest.json")) as f:
            manifest = json.load(f)
        compile_s = manifest["timings"]["compile"].get("total_s") or sum(
            v for k, v in manifest["timings"]["compile"].items()
            if k in ("dynamo_s", "aot_s", "inductor_s") and isinstance(v, (int, float)))
        found = 0
        for stage in manifest["stages"]:
            if stage["key"] == "distributed.collectives":
                with open(os.path.join(out, "bundle", stage["file"])) as f:
                    found = sum(len(g["collectives"]) for g in json.load(f)["graphs"])
        return wall, float(compile_s), found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--target", default="host")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        run_one(args.one[0], json.loads(args.one[1]), args.one[2])
        return
    job(8, args.target)  # warm-up: the OS's file cache, Python's bytecode cache
    print(f"target {args.target}, {args.repeats} runs each, each job in a fresh process (this host's CPU)")
    print(f"{'ranks':>6} {'job median (min-max)':>24} {'compile median':>15} {'job ratio':>10} {'compile ratio':>14}"
          f" {'collectives':>12}")
    base = None
    for n in (1, 2, 8, 64):
        runs = [job(n, args.target) for _ in range(args.repeats)]
        walls, compiles = [r[0] for r in runs], [r[1] for r in runs]
        wall, comp = statistics.median(walls), statistics.median(compiles)
        base = base or (wall, comp)
        print(f"{n:>6} {wall:>9.2f} s ({min(walls):.2f}-{max(walls):.2f}) {comp:>13.2f} s {wall / base[0]:>10.2f}"
              f" {comp / base[1]:>14.2f} {runs[0][2]:>12}")


if __name__ == "__main__":
    main()
