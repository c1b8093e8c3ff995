#!/usr/bin/env python3
"""How fast a small PyTorch job is on a server used the way people use it, against doing it by hand,
all measured in ONE run on this machine.

    .venv/bin/python bench/compile_latency.py [--repeats N] [--class-size 30] [--insecure-no-sandbox]

1. The baseline: a plain `python -c "... torch.compile(model)(*example_inputs)"` of the model, as a
   user runs it on this machine, unsandboxed, with its header cache warm (a throw-away first run
   builds Inductor's precompiled header and ISA probes); then N runs, each a new graph (the
   constant differs: no FX-graph or kernel cache entry is reused). Process start to exit.
2. The first job after a start: `irscope serve` on a fresh data directory (a new install: the
   toolchain warm-up has not run), and the job submitted the moment the server answers; then the
   server restarted on that directory (the toolchain cache is there), a job submitted at once again.
   The fresh install's job waits for the warm-up that builds what the CLI's own first run builds
   (ISA probes, the precompiled header), so it is also given against that run.
3. Back to back: N new jobs, each submitted the moment the one before ended (no waiting for a
   spare), as a user editing and pressing Compile again does.
4. A class at once: `--class-size` jobs submitted at the same moment from as many threads, each a
   different small edit of the model (and, separately, all the same example: answered by one job).

Each job goes through the HTTP API as the page would: POST /api/compile, then GET /api/jobs/<id>
every 20 ms (a class's 30 clients every 700 ms, as the page polls); measured until the Dynamo FX
graph is listed ("first stage") and until it is done.
Prints every run, medians with spread (min-max), ratios to the baseline against the targets of
issue 18, and where the back-to-back jobs' time went, from their own timings. The server runs with
its defaults except: rate limit and per-client cap off (every request of the bench comes from one
address) and a queue of 2x the class. The machine may be shared: rerun on a quiet one to judge.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from testbed.real_servers import Serve, http

SOURCE = "import torch\n\n\ndef model(x):\n    return torch.sin(x) * 2 + {c}\n\n\nexample_inputs = (torch.randn(64),)\n"
CLI_CALL = "\ntorch.compile(model)(*example_inputs)\n"
TARGETS = {"back_to_back_job": 0.5, "back_to_back_first_stage": 0.2, "first_job_after_start": 1.0,
           "class_median_vs_single": 3.0}


def constant(i: int) -> str:
    return f"{1 + (i + 1) / 10000:.4f}"  # 1.0001, 1.0002, ...: a new graph each job, the same work


def fmt(values: list[float]) -> str:
    return (f"median {statistics.median(values):7.2f} s (min {min(values):.2f}, max {max(values):.2f}, "
            f"n={len(values)})")


# --- 1. the baseline ----------------------------------------------------------------------------
def cli_runs(repeats: int, work: str) -> tuple[list[float], float]:
    """The N timed runs, and the first, throw-away one (it builds the ISA probes and the header)."""
    env = dict(os.environ, TMPDIR=os.path.join(work, "tmp"), TORCHINDUCTOR_CACHE_DIR=os.path.join(work, "inductor"),
               TRITON_CACHE_DIR=os.path.join(work, "triton"))
    env.pop("TORCH_TRACE", None)
    os.makedirs(env["TMPDIR"], exist_ok=True)
    times, first = [], 0.0
    for i in range(-1, repeats):
        code = SOURCE.format(c=constant(5000 + i)) + CLI_CALL
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=work)
        seconds = time.perf_counter() - started
        if i >= 0:
            times.append(seconds)
        else:
            first = seconds
        print(f"cli {'warm-up run (header cache, not counted)' if i < 0 else f'run {i + 1}'}: {seconds:.2f} s",
              flush=True)
    return times, first


# --- jobs over HTTP -----------------------------------------------------------------------------
def one_job(base: str, source: str, started: float | None = None, every: float = 0.02,
            options: dict | None = None, first_stage: str = "dynamo.fx_graph") -> dict:
    """Submit and follow one job, asking for it every `every` seconds; its JSON with `_first_s`
    (when a stage whose key starts with `first_stage` was first listed), `_listed_s` (stage key ->
    when it was first listed) and `_done_s` added."""
    started = time.perf_counter() if started is None else started
    request = {"language": "pytorch", "source": source, **({"options": options} if options else {})}
    status, body = http(base, "/api/compile", request, timeout=60)
    if status not in (200, 202):
        raise SystemExit(f"compile request refused: {status} {str(body)[:300]}")
    first = None
    listed: dict[str, float] = {}
    while True:
        _, job = http(base, f"/api/jobs/{body['job']}", timeout=60)
        now = time.perf_counter() - started
        for stage in job["stages"]:
            listed.setdefault(stage["key"], now)
        if first is None and any(s["key"].startswith(first_stage) for s in job["stages"]):
            first = now
        if job["status"] in ("done", "failed"):
            break
        time.sleep(every)
    if job["status"] != "done":
        raise SystemExit(f"job failed: {job['error']}")
    job["_first_s"], job["_done_s"], job["_listed_s"] = (first if first is not None else now), now, listed
    return job


def serve(data: str, args: argparse.Namespace, class_size: int) -> Serve:
    settings = {"languages": "pytorch", "rate_limit": "", "max_jobs_per_client": 0,
                "max_queued_jobs": 2 * class_size}
    return Serve(data, settings, ("--insecure-no-sandbox",) if args.insecure_no_sandbox else ()).start(timeout=120)


def worker_of(job: dict) -> str:
    j = job["timings"].get("job", {})
    if j.get("worker") != "pre-started":
        return "cold"
    if (j.get("spare") or {}).get("forked_from_template"):
        return "forked from a ready template" if j.get("worker_was_ready") else "forked from a warming template"
    return "spare (ready)" if j.get("worker_was_ready") else "spare (still warming up)"


def phase_table(jobs: list[dict]) -> list[tuple[str, list[float]]]:
    """Where a job's time went, from its own timings (seconds, one value per job)."""
    rows: dict[str, list[float]] = {}

    def add(name: str, value) -> None:
        if isinstance(value, (int, float)):
            rows.setdefault(name, []).append(float(value))

    for job in jobs:
        t = job["timings"]
        c, r, j = t.get("compile", {}), t.get("run", {}), t.get("job", {})
        add("job, as the runner saw it (sandbox start to exit)", j.get("wall_s"))
        add("  import torch in the job (0: the spare had)", c.get("import_torch_s"))
        add("  running the user's source (and the fake-tensor peak estimate)", c.get("run_source_s"))
        add("  compile + first call (torch.compile, PyTorch's own clock)", c.get("first_call_s"))
        add("    Dynamo: tracing", c.get("dynamo_tracing_s"))
        add("    AOTAutograd", c.get("aot_autograd_s"))
        add("    Inductor: lowering", c.get("inductor_lowering_s"))
        add("    Inductor: scheduling + code generation", c.get("scheduling_codegen_s"))
        add("    Inductor: kernel compile (g++, precompiled header)", c.get("kernel_compile_s"))
        add("  writing the stages that wait for the end", c.get("final_stages_s"))
        add("  timing eager calls (warm-up included)", r.get("eager_measure_s"))
        add("  timing compiled calls (warm-up included)", r.get("compiled_measure_s"))
        add("  accuracy + profile of one call each", r.get("profile_s"))
        spare = j.get("spare") or {}
        if spare.get("memory_bytes"):
            add("spare's resident memory when taken (GB)", spare["memory_bytes"] / 1e9)
    return list(rows.items())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--class-size", type=int, default=30)
    parser.add_argument("--insecure-no-sandbox", action="store_true")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="irscope-bench-")
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; work in {work}", flush=True)
    cli, cli_first = cli_runs(args.repeats, os.path.join(work, "cli"))
    cli_med = statistics.median(cli)
    data = os.path.join(work, "server")
    n = iter(range(10**6))

    # 2. the first job after a start: a new install, then a restart
    server = serve(data, args, args.class_size)
    first_fresh = one_job(server.base, SOURCE.format(c=constant(next(n))), started=time.perf_counter())
    print(f"first job after the first start (fresh data directory): done {first_fresh['_done_s']:.2f} s, "
          f"first stage {first_fresh['_first_s']:.2f} s, waited for the warm-up "
          f"{first_fresh['timings']['job'].get('waited_for_toolchain_warm_up_s', 0)} s", flush=True)
    server.stop()
    server = serve(data, args, args.class_size)
    first_restart = one_job(server.base, SOURCE.format(c=constant(next(n))))
    print(f"first job after a restart (toolchain cache on disk): done {first_restart['_done_s']:.2f} s, "
          f"first stage {first_restart['_first_s']:.2f} s ({worker_of(first_restart)})", flush=True)

    try:
        # 3. back to back
        b2b = []
        for i in range(args.repeats):
            job = one_job(server.base, SOURCE.format(c=constant(next(n))))
            b2b.append(job)
            print(f"back-to-back job {i + 1}: first stage {job['_first_s']:.2f} s, done {job['_done_s']:.2f} s "
                  f"({worker_of(job)})", flush=True)
        # the single job the class is compared with: the median back-to-back one
        single = statistics.median(j["_done_s"] for j in b2b)

        # 4. a class at once: different edits, then the same example
        def at_once(sources: list[str]) -> list[dict]:
            results: list[dict | None] = [None] * len(sources)
            gate = threading.Barrier(len(sources))

            def student(k: int) -> None:
                gate.wait()
                # as the page does: every poll_interval_ms (700)
                results[k] = one_job(server.base, sources[k], every=0.7)
            threads = [threading.Thread(target=student, args=(k,)) for k in range(len(sources))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return [r for r in results if r is not None]
        time.sleep(20)  # the spares that back-to-back used are replaced before the class arrives
        edits = at_once([SOURCE.format(c=constant(next(n))) for _ in range(args.class_size)])
        same = at_once([SOURCE.format(c=constant(next(n)))] * args.class_size)
    finally:
        server.stop()

    print()
    print(f"baseline, plain CLI torch.compile (header cache warm):  {fmt(cli)}")
    print(f"the CLI's first run (builds the ISA probes and header): {cli_first:7.2f} s")
    print(f"back to back, job done:                                 {fmt([j['_done_s'] for j in b2b])}")
    print(f"back to back, first stage (Dynamo FX graph):           {fmt([j['_first_s'] for j in b2b])}")
    print(f"a class of {args.class_size} at once, different edits:              "
          f"{fmt([j['_done_s'] for j in edits])}; {len(edits)} of {args.class_size} done")
    print(f"a class of {args.class_size} at once, the same example:            "
          f"{fmt([j['_done_s'] for j in same])}; {len(same)} of {args.class_size} done")
    print()
    rows = [("back-to-back job / CLI", statistics.median(j["_done_s"] for j in b2b) / cli_med,
             TARGETS["back_to_back_job"]),
            ("back-to-back first stage / CLI", statistics.median(j["_first_s"] for j in b2b) / cli_med,
             TARGETS["back_to_back_first_stage"]),
            ("first job after the first start / CLI", first_fresh["_done_s"] / cli_med,
             TARGETS["first_job_after_start"]),
            ("first job after the first start / CLI's first run", first_fresh["_done_s"] / cli_first,
             TARGETS["first_job_after_start"]),
            ("first job after a restart / CLI", first_restart["_done_s"] / cli_med,
             TARGETS["first_job_after_start"]),
            ("class, different edits: median / single job", statistics.median(j["_done_s"] for j in edits) / single,
             TARGETS["class_median_vs_single"]),
            ("class, the same example: median / single job", statistics.median(j["_done_s"] for j in same) / single,
             TARGETS["class_median_vs_single"])]
    for name, value, target in rows:
        print(f"{name:<48} {value:7.2f}  target <= {target:g}  {'meets' if value <= target else 'MISSES'}")
    print()
    print("where the back-to-back jobs' time went (their own timings; median, min-max):")
    for name, values in phase_table(b2b):
        print(f"  {name:<70} {statistics.median(values):7.3f}  ({min(values):.3f}-{max(values):.3f})")
    workers = {}
    for job in edits:
        workers[worker_of(job)] = workers.get(worker_of(job), 0) + 1
    print(f"the class's jobs ran on: {workers}")
    print(f"\n(load average now {os.getloadavg()[0]:.2f}; server log {data}/server.log)")
    shutil.rmtree(os.path.join(work, "cli"), ignore_errors=True)


if __name__ == "__main__":
    main()
