#!/usr/bin/env python3
"""Cold-start latency of one job: submit -> done, through the real runner and sandbox.

    .venv/bin/python bench/compile_latency.py [--repeats N] [--insecure-no-sandbox]

Each repeat uses a fresh data directory and a source that differs only in a comment, so the result
cache never answers and every job starts a new sandboxed worker with an empty Inductor cache.
Prints each run, then the median and spread, and the ratio to the 18 s reference (a tiny model
under bubblewrap, cold, measured by hand before irscope existed).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])

TINY = "import torch\n\ndef model(x):\n    return torch.sin(x) * 2 + 1\n\nexample_inputs = (torch.randn(64),)\n"
REFERENCE_S = 18.0


def one(repeat: int, sandbox: str) -> tuple[float, dict]:
    from app import create_app
    app = create_app({"data_dir": tempfile.mkdtemp(prefix="irscope-bench-"), "languages": "pytorch",
                      "sandbox": sandbox})
    svc = app.extensions["irscope"]
    request = svc.jobs.parse({"language": "pytorch", "source": TINY + f"# run {repeat} {time.time()}\n"})
    started = time.perf_counter()
    job, _ = svc.jobs.submit(request)
    while not (current := svc.store.get_job(job.id)).finished:
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    svc.runner.shutdown()
    if current.error:
        raise SystemExit(f"job failed: {current.error}")
    return elapsed, current.timings


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--insecure-no-sandbox", action="store_true")
    args = parser.parse_args()
    sandbox = "none" if args.insecure_no_sandbox else "bwrap"
    times = []
    for i in range(args.repeats):
        seconds, timings = one(i, sandbox)
        c = timings.get("compile", {})
        print(f"run {i + 1}: {seconds:.2f} s (import torch {c.get('import_torch_s', 0):.2f} s, "
              f"first call {c.get('first_call_s', 0):.2f} s, inductor total {c.get('total_s', 0):.2f} s, "
              f"timing runs and trace reading the rest)", flush=True)
        times.append(seconds)
    median = statistics.median(times)
    spread = (max(times) - min(times)) if len(times) > 1 else 0.0
    print(f"median {median:.2f} s, spread (max-min) {spread:.2f} s over {len(times)} runs, sandbox={sandbox}")
    print(f"ratio to the {REFERENCE_S:.0f} s reference: {median / REFERENCE_S:.2f}")


if __name__ == "__main__":
    main()
