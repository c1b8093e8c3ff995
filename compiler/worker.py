"""The worker: runs INSIDE the sandbox, one job per process.

    python -m compiler.worker JOB_DIR

JOB_DIR holds request.json ({"request": ..., "toolchain": ...}); the worker writes the result
bundle to JOB_DIR/out (manifest.json plus one file per stage) and exits. Everything the user's
code raises becomes a failed manifest; only a crash of the process itself (a C++ abort, a signal
from a limit) leaves the manifest at "running", and the runner explains those.
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import tempfile
import time
import traceback

from compiler import dot_drawing, pipelines
from compiler.model import JobError, Request
from compiler.pipelines.base import Bundle, OptionError, UserError
from compiler.pipelines.user_code import user_error


def prewarm(language: str, scratch: str) -> None:
    """A spare worker: set the pipeline's environment and import its compiler before any job
    exists, so the job it is later handed does not wait for the import. Only pipelines whose
    environment() does not depend on the request declare prewarm_modules."""
    pipeline = pipelines.get(language)
    os.environ.update(pipeline.environment(Request(language, "", {}), scratch))
    for module in pipeline.prewarm_modules:
        importlib.import_module(module)


def wait_for_request(path: str, poll_s: float = 0.01) -> None:
    while not os.path.exists(path):
        time.sleep(poll_s)


def main(argv: list[str]) -> int:
    job_dir = argv[1]
    scratch = os.environ.get("IRSCOPE_WORKDIR") or tempfile.mkdtemp(prefix="irscope-")
    os.makedirs(scratch, exist_ok=True)
    os.environ["IRSCOPE_WORKDIR"] = scratch
    spare_for = os.environ.get("IRSCOPE_SPARE_FOR")
    if spare_for:
        prewarm(spare_for, scratch)
        wait_for_request(os.path.join(job_dir, "request.json"))
    with open(os.path.join(job_dir, "request.json"), encoding="utf-8") as f:
        spec = json.load(f)
    request = Request.from_json(spec["request"])
    bundle = Bundle(os.path.join(job_dir, "out"), spec.get("toolchain"))
    try:
        pipeline = pipelines.get(request.language)
        request = Request(request.language, request.source, pipeline.normalise_options(request.options))
        if not spare_for:
            os.environ.update(pipeline.environment(request, scratch))
        os.chdir(scratch)
        pipeline.run(request, bundle)
        dot_drawing.add_drawings(bundle)  # Graphviz runs here, in the sandbox, never in the web process
    except UserError as e:
        bundle.finish(e.error)
        return 0
    except OptionError as e:
        bundle.finish(JobError("OptionError", str(e)))
        return 0
    except MemoryError as e:  # outside the user's code (in a compiler): still the limit's message
        bundle.finish(user_error(e, "").error)
        return 0
    except Exception as e:  # noqa: BLE001 - a pipeline bug must still end the job with a message
        traceback.print_exc()
        bundle.finish(JobError("InternalError", f"irscope's {request.language} pipeline failed: "
                                                f"{type(e).__name__}: {e}"[:4000]))
        return 1
    bundle.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
