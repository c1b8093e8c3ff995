#!/usr/bin/env python3
"""What the installed toolchains cost a user, all measured in ONE run on this machine
(docs/toolchains.md).

    .venv/bin/python bench/toolchains.py [--repeats N] [--insecure-no-sandbox]

1. The first job after a fresh start, against a cold CLI `torch.compile`: the baseline is a plain
   `python -c "... torch.compile(model)(*example_inputs)"` on a fresh Inductor cache and header
   directory (it builds the ISA probes and the precompiled header, as a user's first compile on a
   machine does). Then a fresh data directory set up as `./run.sh serve` sets one up (the default
   toolchain's warm-up, `irscope toolchains warm default`, timed on its own), `irscope serve` on it,
   and one job of the same model submitted the moment the server answers.
2. Per installed toolchain, a small job of the language it is for (torch-*/default: a PyTorch
   model; triton-*: a Triton kernel for a virtual sm_90; jax-*: a JAX function), N back to back
   after that toolchain's warm-up (its first job, reported apart), each a new source (a comment
   differs: no result is reused).
3. A version scan of one Triton kernel over every installed toolchain that serves Triton
   (`POST /api/scan`), then the same scan again (its jobs are answered by the result cache).

Prints every run, medians with spread (min-max). The machine may be shared: rerun on a quiet one
to judge.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.compile_latency import CLI_CALL, SOURCE, constant, one_job  # noqa: E402
from compiler import registry  # noqa: E402
from service import toolchain_envs  # noqa: E402
from testbed.real_servers import Serve, http  # noqa: E402

JAX_SOURCE = "import jax\nimport jax.numpy as jnp\n\n\ndef fn(x):\n    return jnp.tanh(x @ x.T) * {c}\n\n\n" \
             "example_args = (jnp.ones((128, 64)),)\n"


def fmt(values: list[float]) -> str:
    return (f"median {statistics.median(values):7.2f} s (min {min(values):.2f}, max {max(values):.2f}, "
            f"n={len(values)})")


def cold_cli(work: str) -> float:
    """A first `torch.compile` on this machine: fresh Inductor cache and header directory."""
    env = dict(os.environ, TMPDIR=os.path.join(work, "tmp"), TORCHINDUCTOR_CACHE_DIR=os.path.join(work, "inductor"),
               TRITON_CACHE_DIR=os.path.join(work, "triton"))
    env.pop("TORCH_TRACE", None)
    os.makedirs(env["TMPDIR"], exist_ok=True)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", SOURCE.format(c=constant(9000)) + CLI_CALL], env=env, check=True, cwd=work)
    return time.perf_counter() - started


def irscope(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "irscope", *args], check=True)


def job_for(chain: toolchain_envs.Toolchain, i: int) -> tuple[str, str, dict]:
    """(language, source, options) of the small job toolchain `chain` is measured with."""
    if chain.name.startswith("jax"):
        return "jax", JAX_SOURCE.format(c=constant(i)), {"toolchain": chain.name}
    if chain.name.startswith("triton"):
        return "triton", registry.get("triton").example + f"\n# run {i}\n", {"toolchain": chain.name,
                                                                            "target": "cuda:sm_90"}
    return "pytorch", SOURCE.format(c=constant(i)), {} if chain.default else {"toolchain": chain.name}


def follow(base: str, language: str, source: str, options: dict) -> float:
    started = time.perf_counter()
    status, body = http(base, "/api/compile", {"language": language, "source": source, "options": options},
                        timeout=60)
    if status not in (200, 202):
        raise SystemExit(f"refused: {status} {str(body)[:300]}")
    while True:
        _, job = http(base, f"/api/jobs/{body['job']}", timeout=60)
        if job["status"] in ("done", "failed"):
            break
        time.sleep(0.05)
    if job["status"] != "done":
        raise SystemExit(f"{language} job on {options.get('toolchain', 'default')} failed: {job['error']}")
    return time.perf_counter() - started


def scan(base: str) -> tuple[float, dict]:
    started = time.perf_counter()
    status, body = http(base, "/api/scan", {"language": "triton", "source": registry.get("triton").example,
                                            "options": {"target": "cuda:sm_90"}, "stage": None}, timeout=60)
    if status not in (200, 202):
        raise SystemExit(f"scan refused: {status} {str(body)[:300]}")
    while True:
        _, result = http(base, f"/api/scans/{body['scan']}", timeout=60)
        if result["status"] == "done":
            return time.perf_counter() - started, result
        time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--insecure-no-sandbox", action="store_true")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="irscope-bench-toolchains-")
    flags = ("--insecure-no-sandbox",) if args.insecure_no_sandbox else ()
    chains = toolchain_envs.installed()
    print(f"toolchains: {', '.join(c.name for c in chains)}", flush=True)
    try:
        cli = cold_cli(work)
        print(f"cold CLI torch.compile (builds the probes and the header): {cli:.2f} s", flush=True)

        data = os.path.join(work, "data")
        started = time.perf_counter()
        irscope("toolchains", "warm", "default", "--data-dir", data)
        warm = time.perf_counter() - started
        settings = {"rate_limit": "", "max_jobs_per_client": 0, "max_queued_jobs": 64}
        server = Serve(data, settings, flags).start(timeout=180)
        try:
            first = one_job(server.base, SOURCE.format(c=constant(1)))["_done_s"]
            print(f"set-up's warm-up of the default toolchain (once, before the server): {warm:.1f} s")
            print(f"first job after a fresh serve: {first:.2f} s = {first / cli:.2f}x the cold CLI "
                  f"(target: <= 1.00x)", flush=True)

            for chain in chains:
                language, source, options = job_for(chain, 100)
                firsts = follow(server.base, language, source, options)
                times = [follow(server.base, *job_for(chain, 200 + i)) for i in range(args.repeats)]
                print(f"{chain.name:14s} {language:8s} first job (its warm-up) {firsts:6.2f} s; "
                      f"back to back {fmt(times)}", flush=True)

            status, _ = http(server.base, "/api/toolchains", timeout=60)
            if status == 200:
                try:
                    once, result = scan(server.base)
                    again, _ = scan(server.base)
                    print(f"scan of the Triton example over {len(result['jobs'])} toolchains: {once:.2f} s; "
                          f"the same scan again (cached): {again:.2f} s; changes: "
                          f"{[(c['from'], c['to'], c['what']) for c in result['changes']]} ({result['compared']})")
                except SystemExit as e:
                    print(f"scan: {e}")
        finally:
            server.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
