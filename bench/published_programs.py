#!/usr/bin/env python3
"""Programs as people have them: every family of tests/programs/families.py (or one directory of
programs, such as a project's own published examples saved locally), each file submitted as pasted
through the real runner and sandbox, with its family's language and options.

    .venv/bin/python bench/published_programs.py [--family NAME ...] [--dir DIR --family NAME]
                                                 [--workers 2] [--spares 1] [--insecure-no-sandbox]

Prints per family: how many programs ended done, failed or were refused, with the kernels the done
ones compiled (Triton PTX and SASS, CuTe PTX); the median job wall time in the sandbox with its
range (min-max) over the family's programs; and every failure's message. For the families that run
on the host (no GPU target: PyTorch's, JAX's), each program is also run cold as `python FILE` in
this run, and the job's wall time divided by that plain run's is printed (median and range); their
jobs run back to back, each submitted once the previous ended and a spare worker is ready.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from bench.model_coverage import kernels, wait_all  # noqa: E402  (the repository on the path first)
from tests.programs.families import FAMILIES, Family, family  # noqa: E402


def compiled(job: dict) -> tuple[int, int]:
    """(kernels compiled, SASS stages) of a job: Triton's (and Inductor's) as model_coverage counts
    them, and CuTe DSL's compiled functions."""
    n_kernels, n_sass = kernels(job)
    keys = [s["key"] for s in job["stages"]]
    return (n_kernels + sum(1 for k in keys if k.startswith("cute.ptx:")),
            n_sass + sum(1 for k in keys if k.startswith("cute.sass:")))


def on_host(fam: Family) -> bool:
    """True when the family's programs run on this machine's CPU (no GPU target)."""
    return fam.options.get("target", "host") in ("host", "cpu")


def plain_run_s(path: str, timeout_s: float = 900) -> float | None:
    """Wall seconds of `python FILE` in a fresh process and an empty directory (None: it failed)."""
    with tempfile.TemporaryDirectory() as cwd:
        started = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, path], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        return time.perf_counter() - started if done.returncode == 0 else None


def wait_for_spare(runner, language: str, timeout_s: float = 300) -> None:
    """Until a spare worker of `language` is ready (none kept for it: at once)."""
    from compiler import registry
    from service.spares import key_language
    deadline = time.monotonic() + timeout_s
    keeps = runner.config.spare_workers > 0 and bool(registry.get(language).prewarm_modules)
    while keeps and time.monotonic() < deadline:
        if any(key_language(key) == language and one["ready"] for key, one in runner.spares.report().items()):
            return
        time.sleep(0.2)


def ended(key: tuple[str, str], status: str) -> str:
    return f"{status}: {key[0]}/{os.path.basename(key[1])}"


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.1f} s (min {min(values):.1f}, max {max(values):.1f})"


def main() -> None:
    from app import create_app
    from service.toolchain import toolchain
    from service.toolchain_cache import warm_toolchain
    parser = argparse.ArgumentParser()
    parser.add_argument("--family", action="append", default=[], help="a family of tests/programs/families.py "
                        "(repeatable; default: every family that has programs)")
    parser.add_argument("--dir", help="a directory of programs to run as the one --family given (its language "
                                      "and options)")
    parser.add_argument("--target", help="the target of every job instead of the family's (examples written for "
                                         "another GPU, e.g. cuda:sm_100 for Blackwell's)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--spares", type=int, default=1, help="spare job processes per language")
    parser.add_argument("--insecure-no-sandbox", action="store_true")
    args = parser.parse_args()
    if args.dir and len(args.family) != 1:
        raise SystemExit("--dir needs exactly one --family (whose language and options its programs take)")
    chosen = [family(name) for name in args.family] if args.family else list(FAMILIES)
    programs: dict[str, list[str]] = {}
    for fam in chosen:
        found = sorted(os.path.join(args.dir, n) for n in os.listdir(args.dir) if n.endswith(".py")) \
            if args.dir else fam.programs()
        if found:
            programs[fam.name] = found
    if not programs:
        raise SystemExit("no programs found")
    if args.target:
        chosen = [dataclasses.replace(fam, options={**fam.options, "target": args.target}) for fam in chosen]
    by_name = {fam.name: fam for fam in chosen}
    languages = sorted({by_name[name].language for name in programs})
    total = sum(len(files) for files in programs.values())
    config = {"data_dir": tempfile.mkdtemp(prefix="irscope-published-"), "languages": ",".join(languages),
              "sandbox": "none" if args.insecure_no_sandbox else "bwrap", "workers": args.workers,
              "spare_workers": args.spares, "reuse_results": False, "max_queued_jobs": total + 1, "rate_limit": "",
              "max_jobs_per_client": 0, "warm_toolchain_cache": False, "wall_time_limit_s": 900}
    app = create_app(config)
    svc = app.extensions["irscope"]
    if svc.refusal:
        raise SystemExit(svc.refusal)
    if "pytorch" in languages:  # the toolchain warm-up (Inductor's ISA probes) `irscope serve` runs at start-up
        warm_toolchain(svc.runner.config, "pytorch", toolchain("pytorch"))
    client = app.test_client()
    ids: dict[tuple[str, str], str] = {}
    refused: dict[tuple[str, str], str] = {}
    jobs: dict[tuple[str, str], dict] = {}
    started = time.perf_counter()
    for name, files in programs.items():
        fam = by_name[name]
        for path in files:
            if on_host(fam):  # back to back, each on a warm worker: what the ratio to a plain run is of
                wait_for_spare(svc.runner, fam.language)
            with open(path, encoding="utf-8") as f:
                body = {"language": fam.language, "source": f.read(), "options": dict(fam.options)}
            response = client.post("/api/compile", json=body)
            if response.status_code not in (200, 202):
                refused[(name, path)] = str((response.get_json() or {}).get("error", response.status_code))
            elif on_host(fam):
                jobs.update(wait_all(client, {(name, path): response.get_json()["job"]}, ended))
            else:
                ids[(name, path)] = response.get_json()["job"]
    jobs.update(wait_all(client, ids, ended))
    total_s = time.perf_counter() - started
    svc.runner.shutdown()
    shutil.rmtree(config["data_dir"], ignore_errors=True)
    # the plain runs after every job ended, so the two never share the machine's cores
    plain = {key: plain_run_s(key[1]) for key in jobs if on_host(by_name[key[0]])}

    for name, files in programs.items():
        fam = by_name[name]
        rows = [(path, jobs.get((name, path)), refused.get((name, path))) for path in files]
        done = [job for _, job, _ in rows if job and job["status"] == "done"]
        failed = [(path, job) for path, job, _ in rows if job and job["status"] == "failed"]
        walls = [((job.get("timings") or {}).get("job") or {}).get("wall_s") for _, job, _ in rows if job]
        walls = [w for w in walls if isinstance(w, (int, float))]
        counts = [compiled(job) for job in done]
        where = args.dir or os.path.join("tests/programs", name)
        print(f"== {name} ({fam.language} {fam.options or ''}; {fam.style}) from {where}")
        print(f"   done {len(done)} / failed {len(failed)} / refused {sum(1 for r in rows if r[2])} of {len(rows)}"
              f" ({100.0 * len(done) / len(rows):.0f} % done); kernels compiled by the done ones: "
              f"{sum(k for k, _ in counts)}, SASS stages {sum(s for _, s in counts)}")
        print(f"   job wall time: median {spread(walls)}")
        if on_host(fam):
            ratios = []
            for path, job, _ in rows:
                wall = ((job or {}).get("timings") or {}).get("job", {}).get("wall_s")
                cold = plain.get((name, path))
                if isinstance(wall, (int, float)) and cold:
                    ratios.append(wall / cold)
            said = (f"median {statistics.median(ratios):.2f}x (min {min(ratios):.2f}x, max {max(ratios):.2f}x) "
                    f"over {len(ratios)} programs") if ratios else "- (no program ran plainly)"
            print(f"   job / cold `python FILE`: {said}")
        for path, job in failed:
            error = job.get("error") or {}
            print(f"   failed {os.path.basename(path)}: {error.get('kind')}: "
                  f"{(error.get('message') or '').splitlines()[0][:300] if error.get('message') else ''}")
        for path, _, why in rows:
            if why:
                print(f"   refused {os.path.basename(path)}: {why[:300]}")
    print(f"{len(jobs)} jobs in {total_s:.0f} s with {args.workers} workers and {args.spares} spare(s) per language")


if __name__ == "__main__":
    main()
