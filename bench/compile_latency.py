#!/usr/bin/env python3
"""How fast a new small PyTorch job is on a warm server, against doing it by hand, in ONE run.

    .venv/bin/python bench/compile_latency.py [--repeats N] [--insecure-no-sandbox]

1. The baseline: a plain `python -c "... torch.compile(model)(*example_inputs)"` of the model,
   run as a user would on this machine, unsandboxed, with its header cache warm: one throw-away
   run first builds Inductor's precompiled header and ISA probes in the bench's own TMPDIR and
   Inductor cache (kept, as a user's are), then N runs each compile a new graph (the constant
   differs, so no FX-graph or kernel cache entry is reused). Process start to exit.
2. `irscope serve`, started by the bench with its defaults (bubblewrap, warm toolchain cache, one
   spare worker). Once the toolchain warm-up has finished and the spare is ready, N new jobs of
   the same model (the same constants), each after the spare that replaced the last one is
   ready, through the HTTP API as the page would: POST /api/compile, then GET /api/jobs/<id>
   every 10 ms. Measured: until the Dynamo FX graph is listed ("first stage visible") and until
   the job is done.
3. A repeated request (the first job's source again: answered from the store), and a permalink
   page (/z/<id>) fetched many times.

Prints every run, medians with spread (min-max), the ratios against the baseline with their
targets (issue 8), and where a job's time goes, from the jobs' own timings. The machine may be
shared: numbers are indicative; rerun on a quiet machine to judge the targets.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SOURCE = "import torch\n\n\ndef model(x):\n    return torch.sin(x) * 2 + {c}\n\n\nexample_inputs = (torch.randn(64),)\n"
CLI_CALL = "\ntorch.compile(model)(*example_inputs)\n"
TARGETS = {"job": 0.5, "first_stage": 0.2, "repeat_ms": 50.0, "permalink_p50_ms": 30.0}


def constant(i: int) -> str:
    return f"{1 + (i + 1) / 1000:.3f}"  # 1.001, 1.002, ...: a new graph each run, the same work


def summary(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def fmt(values: list[float], unit: str = "s", scale: float = 1.0) -> str:
    med, lo, hi = summary([v * scale for v in values])
    return f"median {med:.3f} {unit} (min {lo:.3f}, max {hi:.3f}, n={len(values)})"


# --- 1. the baseline ----------------------------------------------------------------------------
def cli_runs(repeats: int, work: str) -> list[float]:
    env = dict(os.environ, TMPDIR=os.path.join(work, "tmp"), TORCHINDUCTOR_CACHE_DIR=os.path.join(work, "inductor"),
               TRITON_CACHE_DIR=os.path.join(work, "triton"))
    env.pop("TORCH_TRACE", None)
    os.makedirs(env["TMPDIR"], exist_ok=True)
    times = []
    for i in range(-1, repeats):
        code = SOURCE.format(c=constant(1000 + i)) + CLI_CALL
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=work)
        seconds = time.perf_counter() - started
        if i < 0:
            print(f"cli warm-up run (builds the header cache and ISA probes, not counted): {seconds:.2f} s", flush=True)
            continue
        times.append(seconds)
        print(f"cli run {i + 1}: {seconds:.2f} s", flush=True)
    return times


# --- 2. the server ---------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method: str, url: str, body: dict | None = None) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def spare_ready(data: str) -> bool:
    """The server's spare worker has said it is ready (compiler/job_dir.SPARE_READY)."""
    return bool(glob.glob(os.path.join(data, "jobs", "spare-*", "spare-ready")))


def wait_for(what: str, condition, timeout: float = 900) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise SystemExit(f"gave up waiting for {what}")
        time.sleep(0.1)
    return time.monotonic() - started


def one_job(base: str, source: str) -> tuple[float, float, dict]:
    started = time.perf_counter()
    status, body = http("POST", base + "/api/compile", {"language": "pytorch", "source": source})
    if status not in (200, 202):
        raise SystemExit(f"compile request refused: {status} {body[:300]!r}")
    job_id = json.loads(body)["job"]
    first = None
    while True:
        job = json.loads(http("GET", f"{base}/api/jobs/{job_id}")[1])
        now = time.perf_counter() - started
        if first is None and any(s["key"].startswith("dynamo.fx_graph") for s in job["stages"]):
            first = now
        if job["status"] in ("done", "failed"):
            break
        time.sleep(0.01)
    if job["status"] != "done":
        raise SystemExit(f"job failed: {job['error']}")
    return first if first is not None else now, now, job


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
        add("  running the user's source", c.get("run_source_s"))
        add("  compile + first call (torch.compile, PyTorch's own clock)", c.get("first_call_s"))
        add("    Dynamo: tracing", c.get("dynamo_tracing_s"))
        add("    AOTAutograd", c.get("aot_autograd_s"))
        add("    Inductor: lowering", c.get("inductor_lowering_s"))
        add("    Inductor: scheduling + code generation", c.get("scheduling_codegen_s"))
        add("    Inductor: kernel compile (g++, precompiled header)", c.get("kernel_compile_s"))
        add("    whole frame compile (entire_frame_compile)", c.get("total_s"))
        add("  writing the stages that wait for the end", c.get("final_stages_s"))
        add("  timing eager calls (warm-up included)", r.get("eager_measure_s"))
        add("  timing compiled calls (warm-up included)", r.get("compiled_measure_s"))
        add("  accuracy + profile of one call each", r.get("profile_s"))
        warm = c.get("worker_warm_up") or {}
        add("spare, before the job (off the clock): import torch", warm.get("import_s"))
        add("spare, before the job (off the clock): warm-up compile", warm.get("warm_up_compile_s"))
        add("spare, before the job (off the clock): reset", warm.get("reset_s"))
    return list(rows.items())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--permalink-fetches", type=int, default=50)
    parser.add_argument("--insecure-no-sandbox", action="store_true")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="irscope-bench-")
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; work in {work}", flush=True)

    cli = cli_runs(args.repeats, os.path.join(work, "cli"))

    data = os.path.join(work, "server")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = dict(os.environ, IRSCOPE_DATA_DIR=data, IRSCOPE_LANGUAGES="pytorch", IRSCOPE_RATE_LIMIT="",
               IRSCOPE_SPARE_WORKERS="1", IRSCOPE_WARM_TOOLCHAIN_CACHE="true")
    argv = [os.path.join(os.path.dirname(sys.executable), "irscope"), "serve", "--port", str(port)]
    if args.insecure_no_sandbox:
        argv.append("--insecure-no-sandbox")
    log = open(os.path.join(work, "server.log"), "w")
    server = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        wait_for("the server", lambda: http("GET", base + "/api/languages")[0] == 200 if _port_open(port) else False,
                 60)
        waited = wait_for("the toolchain warm-up and a ready spare", lambda: spare_ready(data))
        print(f"server up; toolchain warm-up done and spare ready after {waited:.1f} s", flush=True)
        first, done, jobs = [], [], []
        for i in range(args.repeats):
            wait_for("the replacement spare", lambda: spare_ready(data))
            f, d, job = one_job(base, SOURCE.format(c=constant(i)))
            first.append(f)
            done.append(d)
            jobs.append(job)
            print(f"server job {i + 1}: first stage visible {f:.2f} s, done {d:.2f} s "
                  f"(worker {job['timings']['job']['worker']}, ready: {job['timings']['job'].get('worker_was_ready')})",
                  flush=True)
        repeat = []
        for _ in range(max(args.repeats, 5)):
            started = time.perf_counter()
            status, body = http("POST", base + "/api/compile",
                                {"language": "pytorch", "source": SOURCE.format(c=constant(0))})
            answer = json.loads(body)
            job = answer if answer.get("status") == "done" else \
                json.loads(http("GET", f"{base}/api/jobs/{answer['job']}")[1])
            repeat.append(time.perf_counter() - started)
            assert job["status"] == "done", job
        link = json.loads(http("POST", base + "/api/shortlinks", {"job": jobs[0]["id"]})[1])["url"]
        page = []
        for _ in range(args.permalink_fetches):
            started = time.perf_counter()
            status, body = http("GET", base + link)
            page.append(time.perf_counter() - started)
            assert status == 200, status
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()

    cli_med = statistics.median(cli)
    print()
    print(f"baseline, plain CLI torch.compile (header cache warm): {fmt(cli)}")
    print(f"new small job on a warm server:                       {fmt(done)}")
    print(f"first stage visible (Dynamo FX graph, via the API):   {fmt(first)}")
    print(f"repeated request (answered from the store):           {fmt(repeat, 'ms', 1e3)}")
    print(f"permalink page /z/<id>:                               {fmt(page, 'ms', 1e3)}; "
          f"p90 {sorted(page)[int(len(page) * 0.9) - 1] * 1e3:.1f} ms")
    print()
    rows = [("new small job / CLI", statistics.median(done) / cli_med, TARGETS["job"], ""),
            ("first stage visible / CLI", statistics.median(first) / cli_med, TARGETS["first_stage"], ""),
            ("repeated request", statistics.median(repeat) * 1e3, TARGETS["repeat_ms"], " ms"),
            ("permalink page p50", statistics.median(page) * 1e3, TARGETS["permalink_p50_ms"], " ms")]
    for name, value, target, unit in rows:
        verdict = "meets" if value <= target else "MISSES"
        print(f"{name:<28} {value:8.3f}{unit:<4} target <= {target:g}{unit}  {verdict}")
    print()
    print("where a job's time goes (its own timings; median, min-max over the jobs):")
    for name, values in phase_table(jobs):
        med, lo, hi = summary(values)
        print(f"  {name:<66} {med:7.3f} s  ({lo:.3f}-{hi:.3f})")
    print(f"\n(server log: {work}/server.log; load average now {os.getloadavg()[0]:.2f})")


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


if __name__ == "__main__":
    main()
