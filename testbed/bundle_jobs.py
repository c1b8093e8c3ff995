"""A job run in this process as the worker runs it (its environment set, in its work directory),
its result bundle and error written to a directory, and read back. For the test modules whose
compiles run in child processes of their own: Triton's driver, a FakeTensorMode, CuTe's settings
and the virtual device are process-wide. Imports nothing of the compilers until a job runs."""
from __future__ import annotations

import json
import os
from typing import Any


def run_job(language: str, source: str, options: dict[str, Any], out: str) -> None:
    """Run one job of `language` and write `out/bundle` and `out/error.json` (null when none)."""
    from compiler import registry
    from compiler.model import Request
    from compiler.pipeline import Bundle, JobContext, UserError
    workdir = os.path.join(out, "work")
    os.makedirs(workdir, exist_ok=True)
    pipeline = registry.get(language)
    request = Request(language, source, pipeline.normalise_options(options))
    os.environ.update(pipeline.environment(request, workdir))
    os.chdir(workdir)
    bundle = Bundle(os.path.join(out, "bundle"))
    error = None
    try:
        cache = shared_toolchain_cache(language)
        pipeline.run(request, JobContext(workdir=workdir, bundle=bundle, toolchain_cache=cache))
    except UserError as e:
        error = e.error.to_json()
    with open(os.path.join(out, "error.json"), "w") as f:
        json.dump(error, f)


def shared_toolchain_cache(language: str) -> str:
    """The toolchain cache `language` shares with others (Pipeline.shared_toolchain_cache: the
    kernel languages' virtual CUDA device), built once per test session under a lock, by what its
    warm-up job runs (`run` with an export directory), in IRSCOPE_TEST_TOOLCHAIN_CACHE (the test
    session's; tests/conftest.py sets it). "" where that is unset or the language shares none."""
    import fcntl

    from compiler import registry
    from compiler.model import Request
    from compiler.pipeline import Bundle, JobContext
    base = os.environ.get("IRSCOPE_TEST_TOOLCHAIN_CACHE", "")
    pipeline = registry.get(language)
    if not base or pipeline.shared_toolchain_cache is None:
        return ""
    cache = os.path.join(base, pipeline.shared_toolchain_cache[0])
    with open(cache + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.isdir(cache):
            work = cache + ".warm-up"
            os.makedirs(work, exist_ok=True)
            pipeline.run(Request(language, pipeline.warmup_source or "", {}),
                         JobContext(workdir=work, bundle=Bundle(os.path.join(work, "bundle")),
                                    export_toolchain_cache=os.path.join(work, "export")))
            os.replace(os.path.join(work, "export"), cache)
    return cache


class Job:
    """A job `run_job` wrote: its manifest, error, stages and their texts."""

    def __init__(self, directory: str):
        self.directory = os.path.join(directory, "bundle")
        with open(os.path.join(self.directory, "manifest.json")) as f:
            self.manifest = json.load(f)
        with open(os.path.join(directory, "error.json")) as f:
            self.error = json.load(f)
        self.stages = {s["key"]: s for s in self.manifest["stages"]}

    def text(self, key: str) -> str:
        with open(os.path.join(self.directory, self.stages[key]["file"])) as f:
            return f.read()

    def mapped_lines(self, key: str) -> set[int]:
        return {src for _, src in self.stages[key]["source_map"]}
