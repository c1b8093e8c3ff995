#!/usr/bin/env python3
"""Compile time of XLA:GPU per virtual target, for the sharded-MLP lesson (JAX, 8 GPUs) and the HLO
example, through the XLA pipeline in this process (the compile runs in its child, as in a job; no
sandbox).

    .venv/bin/python bench/xla_gpu_compile.py [--repeats N] [--targets cuda:a100,cuda:h100,...]

Prints, per target and input, the median of XLA's own compile (`compile_ms`: the compile call in the
child), the child process (imports, lowering, compile, cost analysis) and the whole job (with the
stages: dump parsing, SASS of every PTX module, the graph drawing), and the async pairs the
latency-hiding scheduler made with the compute it put between each start and done.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time


def one(language: str, source: str, options: dict) -> tuple[float, dict, dict]:
    from compiler import registry
    from compiler.model import Request
    from compiler.pipeline import Bundle, JobContext
    pipeline = registry.get(language)
    with tempfile.TemporaryDirectory() as work:
        bundle = Bundle(os.path.join(work, "out"))
        started = time.perf_counter()
        pipeline.run(Request(language, source, pipeline.normalise_options(options)),
                     JobContext(workdir=work, bundle=bundle))
        wall = time.perf_counter() - started
        stage = next(s for s in bundle.manifest.stages if s.key == "xla.schedule")
        with open(os.path.join(bundle.directory, stage.file), encoding="utf-8") as f:
            schedule = json.load(f)
    entry = next(c for c in schedule["computations"] if c["entry"])
    return wall, bundle.manifest.timings["compile"], entry


def main() -> None:
    from app import lessons
    from compiler import registry
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--targets", default="cuda:a100,cuda:h100,cuda:b200")
    args = parser.parse_args()
    lesson = lessons.by_slug(lessons.load(), "sharded-mlp-h100")
    inputs = {"lesson (jax)": (lesson.language, lesson.request.source, dict(lesson.request.options)),
              "HLO example": ("hlo", registry.get("hlo").example, {"devices": 8})}
    for target in args.targets.split(","):
        for name, (language, source, options) in inputs.items():
            runs = [one(language, source, dict(options, target=target)) for _ in range(args.repeats)]
            xla = statistics.median(r[1]["total_ms"] for r in runs)
            child = statistics.median(r[1]["child_process_ms"] for r in runs)
            wall = statistics.median(r[0] for r in runs)
            entry = runs[-1][2]
            pairs = "; ".join(f"{p['start']}..{p['done']} over {', '.join(p['compute']) or 'nothing'}"
                              for p in entry.get("async_pairs", []))
            estimated = "with estimates" if any("start" in i for i in entry["instructions"]) else "no LHS dump"
            print(f"{target:10} {name:14} XLA compile {xla:8.0f} ms   child {child:8.0f} ms   job {wall:6.1f} s   "
                  f"({args.repeats} runs; {estimated})")
            print(f"{'':25} async pairs: {pairs or 'none'}")


if __name__ == "__main__":
    main()
