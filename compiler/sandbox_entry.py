"""The job process: runs INSIDE the sandbox, one job per process (a spare: started before its job).

    python -m compiler.sandbox_entry JOB_DIR

JOB_DIR holds the job file (model.JOB_FILE: the request, the toolchain versions, the job's
settings); the worker writes the result bundle to JOB_DIR/out (manifest.json plus one file per
stage) and exits. Everything the user's code raises becomes a failed manifest; only a crash of the
process itself (a C++ abort, a signal from a limit) leaves the manifest at "running", and the runner
explains those.

The job's settings and limits travel in the job file (model.JobSettings), never in the
environment. What the environment says is where this process is, not what the job may do:
`environment_settings` reads it (the only reader of IRSCOPE_* variables in compiler/, a test
checks): the scratch directory the sandbox made, the language a spare prepares for, and the
toolchain cache to seed from (or, for the warm-up job, to export to).
"""
from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import traceback
from dataclasses import dataclass, replace
from typing import Callable, Mapping

from compiler import file_wait, registry, spare_template
from compiler.errors import ErrorKind
from compiler.model import INPUTS_DIR, JOB_FILE, OUT_DIR, SPARE_READY, JobError, JobFile, Request
from compiler.pipeline import Bundle, JobContext, OptionError, UserError
from compiler.user_code import disk_limit_error, is_out_of_memory, out_of_disk, user_error


@dataclass(frozen=True)
class ProcessSettings:
    """Where this job process is (from its environment), before and apart from its job."""

    workdir: str  # the job's private scratch directory ("" : make one)
    spare_for: str  # a pre-started worker: the language to import before its job arrives ("" : none)
    template: bool  # a spare template: it forks one job process per slot (compiler/spare_template.py)
    toolchain_cache: str
    export_toolchain_cache: str


def environment_settings(environ: Mapping[str, str]) -> ProcessSettings:
    """The process's settings from its environment (the runner's job_process.environment, the
    sandbox's IRSCOPE_WORKDIR). The only reader of IRSCOPE_* variables in compiler/."""
    return ProcessSettings(
        workdir=environ.get("IRSCOPE_WORKDIR", ""),
        spare_for=environ.get("IRSCOPE_SPARE_FOR", ""),
        template=environ.get("IRSCOPE_SPARE_TEMPLATE", "") == "1",
        toolchain_cache=environ.get("IRSCOPE_TOOLCHAIN_CACHE", ""),
        export_toolchain_cache=environ.get("IRSCOPE_EXPORT_TOOLCHAIN_CACHE", ""),
    )


def prewarm(spare_for: str, scratch: str, toolchain_cache: str, job_dir: str,
            job_arrived: Callable[[], bool], export_toolchain_cache: str = "") -> None:
    """A spare worker (`spare_for`: its language, or `<language>@<kind>`): set the pipeline's
    environment and let the pipeline get the process ready (import its compiler, maybe a warm-up
    compile of its own code) before any job exists, so the job it is later handed does not wait for
    that. Only pipelines whose environment() does not depend on the request declare prewarm_modules.
    Then say so (model.SPARE_READY) for the runner."""
    language, _, kind = spare_for.partition("@")
    pipeline = registry.get(language)
    os.environ.update(pipeline.environment(Request(language, "", {}), scratch))
    _without_output(lambda: pipeline.prepare_spare(scratch, toolchain_cache, kind, job_arrived=job_arrived,
                                                   export_toolchain_cache=export_toolchain_cache))
    with open(os.path.join(job_dir, SPARE_READY), "w", encoding="utf-8"):
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


def main(argv: list[str]) -> int:
    job_dir = argv[1]
    process = environment_settings(os.environ)
    scratch = process.workdir or tempfile.mkdtemp(prefix="irscope-")
    os.makedirs(scratch, exist_ok=True)
    if process.spare_for and process.template:
        # (a template of a fresh install builds and exports the toolchain cache in its warm-up)
        prewarm(process.spare_for, scratch, process.toolchain_cache, job_dir, spare_template.job_waiting,
                process.export_toolchain_cache)
        pipeline = registry.get(process.spare_for.partition("@")[0])
        carried = pipeline.template_carried_dirs()
        finish = lambda: _without_output(lambda: pipeline.finish_spare(scratch, process.toolchain_cache))  # noqa: E731
        if not spare_template.serve(job_dir, carried, after_first_fork=finish):
            return 0  # the template: every slot served
        job_dir = spare_template.JOB_DIR  # a forked job process, in a sandbox of its own
        process = replace(process, export_toolchain_cache="")  # the template's task, not its jobs'
        os.makedirs(scratch, exist_ok=True)  # its /tmp is new
    elif process.spare_for:
        job_file = os.path.join(job_dir, JOB_FILE)
        prewarm(process.spare_for, scratch, process.toolchain_cache, job_dir, lambda: os.path.exists(job_file))
        file_wait.wait_for_file(job_file)
    with open(os.path.join(job_dir, JOB_FILE), encoding="utf-8") as f:
        job = JobFile.from_json(json.load(f))
    request, settings = job.request, job.settings
    bundle = Bundle(os.path.join(job_dir, OUT_DIR), job.toolchain, settings.stage_bytes)
    inputs = os.path.join(job_dir, INPUTS_DIR)
    ctx = JobContext(workdir=scratch, bundle=bundle, settings=settings, toolchain_cache=process.toolchain_cache,
                     export_toolchain_cache=process.export_toolchain_cache,
                     inputs_dir=inputs if os.path.isdir(inputs) else "")
    try:
        pipeline = registry.get(request.language)
        request = Request(request.language, request.source, pipeline.normalise_options(request.options))
        if not process.spare_for:
            os.environ.update(pipeline.environment(request, scratch))
        os.chdir(scratch)
        pipeline.run(request, ctx)
    except UserError as e:
        bundle.finish(e.error)
        return 0
    except OptionError as e:
        bundle.finish(JobError(ErrorKind.OptionError, str(e)))
        return 0
    except MemoryError as e:  # outside the user's code (in a compiler): still the limit's message
        bundle.finish(user_error(e, "", settings).error)
        return 0
    except Exception as e:  # noqa: BLE001 - a pipeline bug must still end the job with a message
        if is_out_of_memory(e):  # in any form (a C++ allocator, g++, ENOMEM): the limit, not a bug
            bundle.finish(user_error(e, "", settings, during=f"running the {request.language} pipeline").error)
            return 0
        full = out_of_disk(e)
        if full is not None:  # the compiler's files (dumps, caches) filled the job's disk: the limit, not a bug
            bundle.finish(disk_limit_error(full, settings, f"while the {request.language} pipeline wrote its files"))
            return 0
        traceback.print_exc()
        bundle.finish(JobError(ErrorKind.InternalError, f"irscope's {request.language} pipeline failed: "
                                                         f"{type(e).__name__}: {e}"[:4000]))
        return 1
    bundle.finish()
    return 0


if __name__ == "__main__":
    code = main(sys.argv)
    # The bundle is finished and the runner ends the job when this process exits: skip the
    # interpreter's teardown (about 1 s once torch and Inductor are loaded, measured on a 2-core
    # host), which nothing of the job needs; what is buffered is flushed first.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
