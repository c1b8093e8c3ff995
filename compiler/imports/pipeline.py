"""The `import` language: a compiler log made on the user's own machine (a GPU machine, typically),
shown with the stages a live job shows. Jobs of this language are made by uploading an archive
(app/imports.py, POST /api/imports), never from a pasted source: the request's source is the
upload's description, and the runner puts the upload itself into the job directory (`inputs`).

Inside the sandbox the archive is unpacked by rules (compiler/imports/archive.py), then read as
whichever of these it holds:

- a TORCH_TRACE directory: the entries go through compiler/pytorch/trace_stages.py, the function
  the `pytorch` pipeline writes its stages with, and its compile timings through the same code;
- a TritonParse trace (.ndjson, maybe gzipped): each compilation goes through
  compiler/triton/kernel_stages.py, as the `triton` pipeline's kernels do;
- an XLA dump directory (`--xla_dump_to`): pass snapshots, buffer assignment and memory, kernels,
  through compiler/xla/dump_stages.py, as the XLA pipelines write them.
"""
from __future__ import annotations

import os
import re
from typing import Any

from compiler.errors import ErrorKind
from compiler.model import Request
from compiler.pipeline import JobContext, Option, Pipeline, UserError

ARCHIVE_NAME = "archive"  # the upload's name inside the job's inputs/
KINDS = ("auto", "torch_trace", "tritonparse", "xla_dump")

_DESCRIPTION = re.compile(r"^(?P<key>[a-z0-9_]+): (?P<value>.*)$", re.M)


def describe_upload(name: str, digest: str, size: int) -> str:
    """The source text of an import request: what was uploaded (shown in the editor, part of the
    cache key, so the same archive is answered from the store)."""
    clean = "".join(c if c.isprintable() and c not in "\r\n" else "_" for c in name)[:200]
    return (f"# an imported compiler log (upload it again at /import)\n"
            f"archive: {clean}\nsha256: {digest}\nbytes: {size}\n")


def upload_of(source: str) -> tuple[str, str]:
    """(name, sha256) an import request's source describes; ValueError when it describes none."""
    fields = {m.group("key"): m.group("value").strip() for m in _DESCRIPTION.finditer(source)}
    digest = fields.get("sha256", "")
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise ValueError("an import request names its upload by sha256")
    return fields.get("archive", "upload"), digest


class ImportPipeline(Pipeline):
    key = "import"
    title = "Import a log (TORCH_TRACE, TritonParse, XLA dump)"
    editor_mode = "text"
    lexer = "text"
    example = describe_upload("trace.tar.gz", "0" * 64, 0)
    made_by_upload = True
    toolchain_packages = ("torch", "triton", "jaxlib")  # the parsers read logs of these versions' format
    options = (
        Option("kind", "choice", "auto", "What the archive holds: auto (recognised by its files), torch_trace "
                                         "(a TORCH_TRACE directory), tritonparse (a TritonParse .ndjson trace), "
                                         "xla_dump (an --xla_dump_to directory).", choices=KINDS),
    )

    def describe_upload(self, name: str, digest: str, size: int) -> str:
        return describe_upload(name, digest, size)

    def inputs(self, request: Request) -> dict[str, str]:
        """The upload the runner copies into the job's inputs/ before the worker starts."""
        try:
            return {ARCHIVE_NAME: upload_of(request.source)[1]}
        except ValueError:
            return {}

    def run(self, request: Request, ctx: JobContext) -> None:
        from compiler.imports import archive, readers
        name, digest = upload_of(request.source)
        path = os.path.join(ctx.inputs_dir, ARCHIVE_NAME)
        if not ctx.inputs_dir or not os.path.isfile(path):
            raise UserError(ErrorKind.InputError, "the uploaded archive is not in the job (upload it again at /import)")
        ctx.bundle.progress(f"unpacking {name}")
        unpacked_dir = os.path.join(ctx.workdir, "unpacked")
        try:
            unpacked = archive.unpack(path, unpacked_dir, ctx.settings.import_max_files,
                                      ctx.settings.import_unpacked_bytes, name)
        except archive.ArchiveError as e:
            raise UserError(ErrorKind.InputError, f"{name}: {e}") from None
        kind = request.options.get("kind", "auto")
        if kind == "auto":
            kind = readers.recognise(unpacked_dir, unpacked.files)
            if kind is None:
                listed = ", ".join(unpacked.files[:8]) + (" ..." if len(unpacked.files) > 8 else "")
                raise UserError(ErrorKind.InputError, f"{name}: no TORCH_TRACE log, TritonParse trace or XLA dump "
                                                      f"found in it ({len(unpacked.files)} files: {listed})")
        origin: dict[str, Any] = {"archive": name, "sha256": digest, "container": unpacked.kind,
                                  "files": len(unpacked.files), "unpacked_bytes": unpacked.bytes, "kind": kind}
        ctx.bundle.progress(f"reading the {kind.replace('_', ' ')}")
        reader = {"torch_trace": readers.import_torch_trace, "tritonparse": readers.import_tritonparse,
                  "xla_dump": readers.import_xla_dump}[kind]
        origin.update(reader(ctx, unpacked_dir, unpacked.files))
        sentence = readers.describe(origin)
        ctx.bundle.add("import.origin", "Where this log came from", "Import", "json", {"summary": sentence, **origin},
                       meta={"note": sentence})
        ctx.bundle.timing("target", {"imported": True, "summary": sentence, **origin})
