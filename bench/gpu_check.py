#!/usr/bin/env python3
"""On a machine with a CUDA device: run every GPU-only test (pytest -m gpu) in one call, then time
the triton pipeline's real-device path on the test kernels and print the measured launch times.

    python bench/gpu_check.py            # from the repository root, with the project's venv

Exits non-zero when there is no CUDA device (nothing would be checked) or a test fails.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    import torch
    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device here; the GPU tests would all be skipped", file=sys.stderr)
        return 2
    print(f"device: {torch.cuda.get_device_name(0)} (capability {torch.cuda.get_device_capability(0)})")
    start = time.perf_counter()
    tests = subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-rs", "tests"], cwd=ROOT)
    print(f"pytest -m gpu: exit {tests.returncode} in {time.perf_counter() - start:.1f} s")

    # The measured launch times of the test kernels, as the page would show them.
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import test_triton_pipeline as t
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "kernels.py")
        with open(source, "w") as f:
            f.write(t.KERNELS)
        out = os.path.join(tmp, "job")
        start = time.perf_counter()
        job = subprocess.run([sys.executable, t.__file__, "auto", source, out], cwd=tmp)
        elapsed = time.perf_counter() - start
        if job.returncode != 0:
            print("triton job failed", file=sys.stderr)
            return 1
        result = t.Job(out)
        if result.error:
            print("triton job error:", result.error, file=sys.stderr)
            return 1
        print(f"triton job (compile + run + do_bench): {elapsed:.1f} s on {result.manifest['timings']['target']}")
        print(f"{'kernel':16s} {'grid':14s} {'median ms':>10s} {'p20 ms':>9s} {'p80 ms':>9s}")
        for launch in json.loads(result.text("triton.launches")):
            tm = launch["timing_ms"]
            print(f"{launch['kernel']:16s} {str(launch['grid']):14s} {tm['median']:10.4f} {tm['p20']:9.4f} "
                  f"{tm['p80']:9.4f}")
    return tests.returncode


if __name__ == "__main__":
    sys.exit(main())
