#!/usr/bin/env python3
"""Compile time per kernel config for each kernel language, on a virtual target: the examples of
`triton`, `gluon`, `helion` (with 1 and 3 configs) and `cute`, each job in a fresh process as a
worker runs it (no sandbox, no spare: the whole job, imports included).

    .venv/bin/python bench/kernel_languages.py [--repeats N] [--target cuda:sm_90]

Prints, per language, the median job wall time with its range over the repeats, and per compiled
kernel config the compiler's own compile time where it reports one (Triton's per-stage times in
each kernel's metadata: TTIR to cubin), median over the repeats. CuTe DSL reports no per-stage time;
its row is the job's. Measured on this host's CPU; nothing runs on a GPU.
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


def run_one(language: str, target: str, options: dict, out: str) -> None:
    """Child side: one job, as the worker runs it; its bundle in `out`."""
    from compiler import registry
    from compiler.model import Request
    from compiler.pipeline import Bundle, JobContext
    pipeline = registry.get(language)
    work = os.path.join(out, "work")
    os.makedirs(work)
    request = Request(language, pipeline.example, pipeline.normalise_options({"target": target, **options}))
    os.environ.update(pipeline.environment(request, work))
    os.chdir(work)
    bundle = Bundle(os.path.join(out, "bundle"))
    pipeline.run(request, JobContext(workdir=work, bundle=bundle))


def job(language: str, target: str, options: dict) -> tuple[float, dict[str, float]]:
    """(job wall seconds, kernel config -> the compiler's compile ms) of one job in a fresh process."""
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--one", language, target, json.dumps(options), out], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - started
        with open(os.path.join(out, "bundle", "manifest.json")) as f:
            manifest = json.load(f)
        kernels = {}
        for stage in manifest["stages"]:
            if stage["key"].startswith("triton.metadata:"):
                with open(os.path.join(out, "bundle", stage["file"])) as f:
                    kernels[stage["key"].split(":", 1)[1]] = json.load(f)["compile_total_ms"]
            elif stage["key"].startswith("cute.metadata:"):
                kernels[stage["key"].split(":", 1)[1]] = float("nan")
        return wall, kernels


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--target", default="cuda:sm_90")
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        language, target, options, out = args.one
        run_one(language, target, json.loads(options), out)
        return
    plan = [("triton", {}), ("gluon", {}), ("helion", {}), ("helion", {"configs": 3}), ("cute", {})]
    print(f"kernel languages on a virtual {args.target}, {args.repeats} runs each, on this host's CPU "
          f"({os.cpu_count()} cores); each job in a fresh process, imports included")
    print(f"{'language':<20} {'job s (median, min-max)':<26} kernel config: compile ms (median)")
    for language, options in plan:
        runs = [job(language, args.target, options) for _ in range(args.repeats)]
        walls = [r[0] for r in runs]
        name = language + (f" configs={options['configs']}" if options else "")
        kernels = runs[0][1]
        per_kernel = ", ".join(
            f"{k}: " + ("(not reported)" if kernels[k] != kernels[k] else
                        f"{statistics.median(r[1].get(k, float('nan')) for r in runs):.0f}")
            for k in kernels)
        spread = f"{statistics.median(walls):6.2f} ({min(walls):.2f}-{max(walls):.2f})"
        print(f"{name:<20} {spread:<26} {per_kernel}")


if __name__ == "__main__":
    main()
