"""A TritonParse trace made elsewhere (the `import` language): each compilation written as stages by
compiler/kernels/stages.py, as a live job's kernels are, its source maps pointing into the
kernel's own source."""
from __future__ import annotations

import os
from typing import Any

from compiler.errors import ErrorKind
from compiler.kernels.capture import qualifiers
from compiler.kernels.resources import write_resource_table
from compiler.kernels.stages import write_kernel_stages
from compiler.pipeline import JobContext, UserError, first_line
from compiler.triton.tritonparse import looks_like_tritonparse, read_events


def recognise(root: str, files: list[str]) -> bool:
    return any(looks_like_tritonparse(first_line(os.path.join(root, f))) for f in files)


def read(ctx: JobContext, root: str, files: list[str]) -> dict[str, Any]:
    """The stages of each compilation in a TritonParse trace, as the `triton` pipeline writes a
    kernel's (kernel_stages), source maps pointing into the kernel's own source."""
    traces = [f for f in files if looks_like_tritonparse(first_line(os.path.join(root, f)))]
    if not traces:
        raise UserError(ErrorKind.InputError, "no TritonParse trace in the upload: a trace is one JSON event per line "
                                              "with event_type and payload (tritonparse.structured_logging)")
    files_dir = os.path.join(ctx.workdir, "tritonparse-files")
    compilations, launches, skipped = [], [], 0
    for name in sorted(traces):
        with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
            trace = read_events(f, os.path.join(files_dir, str(len(compilations))))
        compilations += trace.compilations
        launches += trace.launches
        skipped += trace.skipped
    if not compilations:
        raise UserError(ErrorKind.InputError, "the TritonParse trace holds no compilation event")
    records = [r for r, _ in compilations]
    rows = []
    for record, qualifier in zip(records, qualifiers(records)):
        first = record.def_line
        ctx.bundle.progress(f"writing stages of {qualifier}")
        rows.append(write_kernel_stages(ctx.bundle, record, qualifier, ctx.workdir, record.source_file,
                            python_source=(record.source, first) if record.source else None,
                            map_to_user=lambda line, first=first: line - first + 1 if line >= first else None,
                            extra_meta={"imported": True, "source_map_into": f"triton.source:{qualifier}",
                                        "note": "imported from a TritonParse trace: source maps point into the "
                                                "kernel's source (triton.source); no SASS (the trace names the "
                                                "cubin on the machine that made it)"}))
    write_resource_table(ctx.bundle, rows, "Triton", note="from the trace's metadata: a trace without the cubin "
                                                          "or ptxas's log has no register or spill counts")
    if launches:
        ctx.bundle.add("triton.launches", "Launches", "Run", "json", launches, meta={"count": len(launches)})
    versions = sorted({str(r.metadata.get("triton_version")) for r in records if r.metadata.get("triton_version")})
    targets = sorted({_target(r.metadata.get("target")) for r in records})
    return {"log": "TritonParse trace", "made_by": "triton " + ", ".join(versions) if versions else "triton",
            "device": ", ".join(targets), "compilations": len(records), "launches": len(launches),
            "skipped_lines": skipped}


def _target(target: Any) -> str:
    if isinstance(target, dict):
        backend, arch = target.get("backend"), target.get("arch")
        return f"cuda:sm_{arch}" if backend == "cuda" else f"{backend}:{arch}"
    return str(target)
