#!/usr/bin/env python3
"""Which models irscope compiles: every model file of a directory, on each target, through the real
runner and sandbox, with the server's default limits.

    .venv/bin/python bench/model_coverage.py [DIR] [--targets host,cuda:sm_90] [--workers 2]
                                             [--option key=value ...] [--insecure-no-sandbox]

DIR (default bench/models) holds sources in either convention (`model` / `example_inputs`, or
KernelBench's `Model` / `get_inputs` / `get_init_inputs`). Every file is submitted once per target
(`target` option; the others at their defaults: `run: auto`); the table then lists, per file and
target: status, error kind, run mode (compile-only or compile-and-run, chosen by irscope from the
peak the run would hold, estimated on fake tensors), the job's wall time in the sandbox, how many
kernels Inductor generated (C++ kernels on the host, Triton kernels on a GPU target) with how many
Triton compilations (one per autotune config) reached SASS, the estimated and (for the jobs that
ran) the measured peak, and the kind of a notice when the measurement was stopped. A summary line
closes it: counts per run mode, and measured against estimated peak for the jobs that ran.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))


def kernels(job: dict) -> tuple[int, int]:
    """(kernels Inductor generated, Triton compilations that produced SASS) from a job's stages."""
    keys = [s["key"] for s in job["stages"]]
    triton = {re.sub(r"\.\d+$", "", k.split(":", 1)[1]) for k in keys if k.startswith("triton.ptx:")}
    cpp = {k for k in keys if k.startswith("kernel:")}
    sass = sum(1 for k in keys if k.startswith("triton.sass:"))
    return (len(triton) if triton else len(cpp)), sass


def wait_all(client, ids: dict, said: Callable[[Any, str], str]) -> dict:
    """Each job of `ids` (key -> job id) once done or failed: key -> its JSON, polled through the
    app's client; `said(key, status)` is printed to stderr as each ends."""
    jobs: dict = {}
    while len(jobs) < len(ids):
        for key, job_id in ids.items():
            if key not in jobs:
                body = client.get(f"/api/jobs/{job_id}").get_json()
                if body["status"] in ("done", "failed"):
                    jobs[key] = body
                    print(f"  {said(key, body['status'])}", file=sys.stderr, flush=True)
        time.sleep(1.0)
    return jobs


def main() -> None:
    from app import create_app
    from service.toolchain import toolchain
    from service.toolchain_cache import warm_toolchain
    parser = argparse.ArgumentParser()
    parser.add_argument("directory", nargs="?", default=os.path.join(HERE, "models"))
    parser.add_argument("--targets", default="host,cuda:sm_90")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--option", action="append", default=[], help="key=value, for every job")
    parser.add_argument("--insecure-no-sandbox", action="store_true")
    args = parser.parse_args()
    files = sorted(f for f in os.listdir(args.directory) if f.endswith(".py"))
    targets = args.targets.split(",")
    extra = dict(o.split("=", 1) for o in args.option)
    config = {"data_dir": tempfile.mkdtemp(prefix="irscope-coverage-"), "languages": "pytorch",
              "sandbox": "none" if args.insecure_no_sandbox else "bwrap", "workers": args.workers,
              "spare_workers": 0, "reuse_results": False, "max_queued_jobs": len(files) * len(targets) + 1,
              "rate_limit": "", "max_jobs_per_client": 0, "warm_toolchain_cache": False}
    app = create_app(config)
    svc = app.extensions["irscope"]
    if svc.refusal:
        raise SystemExit(svc.refusal)
    # the toolchain warm-up (Inductor's ISA probes), which `irscope serve` runs at start-up
    warm_toolchain(svc.runner.config, "pytorch", toolchain("pytorch"))
    client = app.test_client()
    ids: dict[tuple[str, str], str] = {}
    started = time.perf_counter()
    for name in files:
        with open(os.path.join(args.directory, name), encoding="utf-8") as f:
            source = f.read()
        for target in targets:
            body = {"language": "pytorch", "source": source, "options": {"target": target, **extra}}
            response = client.post("/api/compile", json=body)
            if response.status_code not in (200, 202):
                raise SystemExit(f"{name} {target}: {response.status_code} {response.get_json()}")
            ids[(name, target)] = response.get_json()["job"]
    jobs = wait_all(client, ids, lambda key, status: f"finished {key[0]} on {key[1]}: {status}")
    total_s = time.perf_counter() - started
    svc.runner.shutdown()
    shutil.rmtree(config["data_dir"], ignore_errors=True)  # the jobs' stores: read above, not kept

    width = max(len(f) for f in files)
    print(f"{'model file':<{width}}  {'target':<11} {'status':<6} {'error kind':<16} {'run mode':<15} "
          f"{'wall s':>7} {'kernels':>7} {'SASS':>5} {'est. GB':>8} {'meas. GB':>8} {'notice':<10}")
    ok = 0
    kinds: dict[str, int] = {}
    modes: dict[str, int] = {}
    peaks: list[tuple[str, int, int]] = []  # the models that ran: (file, estimated, measured peak)
    for name in files:
        for target in targets:
            job = jobs[(name, target)]
            error = job.get("error") or {}
            mode = ((job.get("timings") or {}).get("run_mode") or {}).get("mode", "-")
            wall = ((job.get("timings") or {}).get("job") or {}).get("wall_s")
            n_kernels, n_sass = kernels(job)
            ok += job["status"] == "done"
            if error:
                kinds[error["kind"]] = kinds.get(error["kind"], 0) + 1
            modes[mode] = modes.get(mode, 0) + 1
            run_mode = (job.get("timings") or {}).get("run_mode") or {}
            est, meas = run_mode.get("estimated_peak_bytes"), run_mode.get("measured_peak_bytes")
            notice = ((job.get("timings") or {}).get("not_measured") or {}).get("kind", "-")
            if mode == "compile-and-run" and isinstance(est, int) and isinstance(meas, int):
                peaks.append((name, est, meas))
            print(f"{name:<{width}}  {target:<11} {job['status']:<6} {error.get('kind', '-'):<16} {mode:<15} "
                  f"{(f'{wall:.1f}' if isinstance(wall, (int, float)) else '-'):>7} {n_kernels:>7} {n_sass:>5} "
                  f"{(f'{est / 1e9:.2f}' if isinstance(est, int) else '-'):>8} "
                  f"{(f'{meas / 1e9:.2f}' if isinstance(meas, int) else '-'):>8} {notice:<10}")
            if error:
                print(f"{'':<{width}}    {error.get('message', '')[:300]}")
    print(f"summary: {ok}/{len(jobs)} compiled ({len(files)} files x {len(targets)} targets); run modes: "
          + ", ".join(f"{m} {n}" for m, n in sorted(modes.items()))
          + "; errors: " + (", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "none")
          + f"; {total_s:.0f} s in all with {args.workers} workers")
    if peaks:
        ratios = sorted(m / e for _, e, m in peaks)
        print(f"the {len(peaks)} jobs that ran: measured / estimated peak median {ratios[len(ratios) // 2]:.2f} "
              f"(min {ratios[0]:.2f}, max {ratios[-1]:.2f}); measured: the job process's resident high-water "
              "mark less its memory after importing torch (the compile's own memory included)")


if __name__ == "__main__":
    main()
