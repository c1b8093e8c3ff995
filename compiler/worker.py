"""The worker: runs INSIDE the sandbox, one job per process.

    python -m compiler.worker JOB_DIR

JOB_DIR holds request.json ({"request": ..., "toolchain": ...}); the worker writes the result
bundle to JOB_DIR/out (manifest.json plus one file per stage) and exits. Everything the user's
code raises becomes a failed manifest; only a crash of the process itself (a C++ abort, a signal
from a limit) leaves the manifest at "running", and the runner explains those.

The runner passes the job's settings through the environment (compiler/runner.py: worker_env);
`environment_settings` is the one place that reads them, and the worker builds the job's
JobContext from them once and hands it to the pipeline.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from typing import Mapping

from compiler import job_dir as job_dirs
from compiler import registry
from compiler.model import JobError, Request
from compiler.pipeline import DEFAULT_IMPORT_BYTES, DEFAULT_IMPORT_FILES, DEFAULT_MAX_STAGE_BYTES, DEFAULT_MEASURE_S, \
    DEFAULT_OUTPUT_LIMIT_BYTES, DEFAULT_RUN_MEMORY_PERCENT, Bundle, JobContext, JobLimits, OptionError, UserError
from compiler.user_code import is_out_of_memory, user_error


@dataclass(frozen=True)
class WorkerSettings:
    """What the runner tells a worker about its job, besides the request."""

    workdir: str  # the job's private scratch directory ("" : make one)
    spare_for: str  # a pre-started worker: the language to import before its job arrives ("" : none)
    limits: JobLimits
    max_stage_bytes: int
    toolchain_cache: str
    export_toolchain_cache: str


def environment_settings(environ: Mapping[str, str]) -> WorkerSettings:
    """The worker's settings from its environment (the runner's worker_env, the sandbox's
    IRSCOPE_WORKDIR). The only reader of IRSCOPE_* variables in compiler/ (a test checks)."""
    def number(name: str) -> int | None:
        value = environ.get(name, "")
        return int(value) if value.strip() else None

    def seconds(name: str, default: float) -> float:
        value = environ.get(name, "")
        return float(value) if value.strip() else default

    return WorkerSettings(
        workdir=environ.get("IRSCOPE_WORKDIR", ""),
        spare_for=environ.get("IRSCOPE_SPARE_FOR", ""),
        limits=JobLimits(output_bytes=number("IRSCOPE_OUTPUT_LIMIT") or DEFAULT_OUTPUT_LIMIT_BYTES,
                         memory_mb=number("IRSCOPE_MEMORY_LIMIT_MB"),
                         file_size_mb=number("IRSCOPE_FILE_SIZE_LIMIT_MB"),
                         measure_s=seconds("IRSCOPE_MEASURE_S", DEFAULT_MEASURE_S),
                         import_files=number("IRSCOPE_IMPORT_MAX_FILES") or DEFAULT_IMPORT_FILES,
                         import_bytes=number("IRSCOPE_IMPORT_MAX_UNPACKED_BYTES") or DEFAULT_IMPORT_BYTES,
                         run_memory_percent=number("IRSCOPE_RUN_MEMORY_PERCENT") or DEFAULT_RUN_MEMORY_PERCENT),
        max_stage_bytes=number("IRSCOPE_MAX_STAGE_BYTES") or DEFAULT_MAX_STAGE_BYTES,
        toolchain_cache=environ.get("IRSCOPE_TOOLCHAIN_CACHE", ""),
        export_toolchain_cache=environ.get("IRSCOPE_EXPORT_TOOLCHAIN_CACHE", ""),
    )


def prewarm(language: str, scratch: str, toolchain_cache: str, job_dir: str) -> None:
    """A spare worker: set the pipeline's environment and let the pipeline get the process ready
    (import its compiler, maybe a warm-up compile of its own code) before any job exists, so the
    job it is later handed does not wait for that. Only pipelines whose environment() does not
    depend on the request declare prewarm_modules. Then say so (job_dir.SPARE_READY) for the runner."""
    pipeline = registry.get(language)
    os.environ.update(pipeline.environment(Request(language, "", {}), scratch))
    _without_output(lambda: pipeline.prepare_spare(scratch, toolchain_cache))
    with open(os.path.join(job_dir, job_dirs.SPARE_READY), "w", encoding="utf-8"):
        pass


def _without_output(fn) -> None:
    """Run `fn` with the process's stdout and stderr (file descriptors 1 and 2, which the runner
    keeps as the job's worker log) going to a scratch file: what a spare prints while it gets
    ready is not its job's. Should `fn` fail, the end of that output is printed after all."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            fn()
        except BaseException:
            _restore(saved)
            log.seek(0)
            sys.stderr.write(log.read().decode("utf-8", "replace")[-4000:])
            raise
        _restore(saved)


def _restore(saved: tuple[int, int]) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(saved[0], 1)
    os.dup2(saved[1], 2)


def wait_for_request(path: str, poll_s: float = 0.01) -> None:
    while not os.path.exists(path):
        time.sleep(poll_s)


def main(argv: list[str]) -> int:
    job_dir = argv[1]
    settings = environment_settings(os.environ)
    scratch = settings.workdir or tempfile.mkdtemp(prefix="irscope-")
    os.makedirs(scratch, exist_ok=True)
    if settings.spare_for:
        prewarm(settings.spare_for, scratch, settings.toolchain_cache, job_dir)
        wait_for_request(os.path.join(job_dir, "request.json"))
    with open(os.path.join(job_dir, "request.json"), encoding="utf-8") as f:
        spec = json.load(f)
    request = Request.from_json(spec["request"])
    bundle = Bundle(os.path.join(job_dir, "out"), spec.get("toolchain"), settings.max_stage_bytes)
    ctx = JobContext(workdir=scratch, bundle=bundle, limits=settings.limits,
                     toolchain_cache=settings.toolchain_cache,
                     export_toolchain_cache=settings.export_toolchain_cache,
                     inputs_dir=os.path.join(job_dir, "inputs") if os.path.isdir(os.path.join(job_dir, "inputs")) else "")
    try:
        pipeline = registry.get(request.language)
        request = Request(request.language, request.source, pipeline.normalise_options(request.options))
        if not settings.spare_for:
            os.environ.update(pipeline.environment(request, scratch))
        os.chdir(scratch)
        pipeline.run(request, ctx)
    except UserError as e:
        bundle.finish(e.error)
        return 0
    except OptionError as e:
        bundle.finish(JobError("OptionError", str(e)))
        return 0
    except MemoryError as e:  # outside the user's code (in a compiler): still the limit's message
        bundle.finish(user_error(e, "", ctx.limits).error)
        return 0
    except Exception as e:  # noqa: BLE001 - a pipeline bug must still end the job with a message
        if is_out_of_memory(e):  # in any form (a C++ allocator, g++, ENOMEM): the limit, not a bug
            bundle.finish(user_error(e, "", ctx.limits, during=f"running the {request.language} pipeline").error)
            return 0
        traceback.print_exc()
        bundle.finish(JobError("InternalError", f"irscope's {request.language} pipeline failed: "
                                                f"{type(e).__name__}: {e}"[:4000]))
        return 1
    bundle.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
