#!/usr/bin/env python3
"""Cold-start latency of one job: submit -> done, through the real runner and sandbox.

    .venv/bin/python bench/compile_latency.py [--repeats N] [--insecure-no-sandbox]

Each repeat submits a source that differs only in a comment, so the result cache never answers and
every job starts a new sandboxed worker with an empty Inductor cache: first with no toolchain
cache ("cold"), then seeded with the ISA probes of the trusted warm-up job ("warm"), then also
handed to a pre-started worker that has torch imported ("warm + spare", what `irscope serve` does). Prints each run, the median and spread of each, their ratio, and the
ratio to the 18 s reference (a tiny model under bubblewrap, cold, measured by hand before irscope).
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


def one(app, repeat: int) -> tuple[float, dict]:
    svc = app.extensions["irscope"]
    request = svc.jobs.parse({"language": "pytorch", "source": TINY + f"# run {repeat} {time.time()}\n"})
    started = time.perf_counter()
    job, _ = svc.jobs.submit(request)
    while not (current := svc.store.get_job(job.id)).finished:
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    if current.error:
        raise SystemExit(f"job failed: {current.error}")
    return elapsed, current.timings


def series(app, label: str, repeats: int, pause_s: float = 0.0) -> float:
    times = []
    for i in range(repeats):
        time.sleep(pause_s if i else 0.0)  # let the replacement spare finish its import
        seconds, timings = one(app, i)
        c = timings.get("compile", {})
        print(f"{label} run {i + 1}: {seconds:.2f} s (import torch {c.get('import_torch_s', 0):.2f} s, "
              f"first call {c.get('first_call_s', 0):.2f} s, ISA probes seeded: "
              f"{c.get('isa_probes_from_toolchain_cache', 0)})", flush=True)
        times.append(seconds)
    median = statistics.median(times)
    spread = (max(times) - min(times)) if len(times) > 1 else 0.0
    print(f"{label}: median {median:.2f} s, spread (max-min) {spread:.2f} s over {len(times)} runs; "
          f"ratio to the {REFERENCE_S:.0f} s reference {median / REFERENCE_S:.2f}", flush=True)
    return median


def main() -> None:
    from app import create_app
    from compiler import runner
    from compiler.toolchain import toolchain
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--insecure-no-sandbox", action="store_true")
    args = parser.parse_args()
    config = {"data_dir": tempfile.mkdtemp(prefix="irscope-bench-"), "languages": "pytorch",
              "sandbox": "none" if args.insecure_no_sandbox else "bwrap", "warm_toolchain_cache": False,
              "workers": 1, "spare_workers": 0}
    app = create_app(config)
    cold = series(app, "cold", args.repeats)
    started = time.perf_counter()
    runner.warm_toolchain(app.extensions["irscope"].runner.config, "pytorch", toolchain("pytorch"))
    print(f"warm-up job (once per server and toolchain): {time.perf_counter() - started:.2f} s", flush=True)
    warm = series(app, "warm", args.repeats)
    app.extensions["irscope"].runner.shutdown()
    # what `irscope serve` does: toolchain cache plus one pre-started worker, torch already imported
    app = create_app(dict(config, spare_workers=1))
    spares = app.extensions["irscope"].runner.spares
    while not spares._spares.get("pytorch"):
        time.sleep(0.1)
    time.sleep(10)  # the spare imports torch before the first job arrives, as between a class's edits
    served = series(app, "warm + spare", args.repeats, pause_s=10)
    app.extensions["irscope"].runner.shutdown()
    print(f"warm / cold: {warm / cold:.2f}; warm + spare / cold: {served / cold:.2f}")


if __name__ == "__main__":
    main()
