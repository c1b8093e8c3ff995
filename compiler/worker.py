"""The worker: runs INSIDE the sandbox, one job per process.

    python -m compiler.worker JOB_DIR

JOB_DIR holds request.json ({"request": ..., "toolchain": ...}); the worker writes the result
bundle to JOB_DIR/out (manifest.json plus one file per stage) and exits. Everything the user's
code raises becomes a failed manifest; only a crash of the process itself (a C++ abort, a signal
from a limit) leaves the manifest at "running", and the runner explains those.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback

from compiler import pipelines
from compiler.model import JobError, Request
from compiler.pipelines.base import Bundle, OptionError, UserError
from compiler.pipelines.user_code import user_error


def main(argv: list[str]) -> int:
    job_dir = argv[1]
    with open(os.path.join(job_dir, "request.json"), encoding="utf-8") as f:
        spec = json.load(f)
    request = Request.from_json(spec["request"])
    bundle = Bundle(os.path.join(job_dir, "out"), spec.get("toolchain"))
    scratch = os.environ.get("IRSCOPE_WORKDIR") or tempfile.mkdtemp(prefix="irscope-")
    os.makedirs(scratch, exist_ok=True)
    os.environ["IRSCOPE_WORKDIR"] = scratch
    try:
        pipeline = pipelines.get(request.language)
        request = Request(request.language, request.source, pipeline.normalise_options(request.options))
        os.environ.update(pipeline.environment(request, scratch))
        os.chdir(scratch)
        pipeline.run(request, bundle)
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
