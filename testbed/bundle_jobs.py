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
        pipeline.run(request, JobContext(workdir=workdir, bundle=bundle))
    except UserError as e:
        error = e.error.to_json()
    with open(os.path.join(out, "error.json"), "w") as f:
        json.dump(error, f)


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
