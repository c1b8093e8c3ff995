"""The `import` language: a compiler log made on the user's own machine (a GPU machine, typically),
shown with the stages a live job shows. Jobs of this language are made by uploading an archive
(app/imports.py, POST /api/imports), never from a pasted source: the request's source is the
upload's description, and the runner puts the upload itself into the job directory (`inputs`).

Inside the sandbox the archive is unpacked by rules (compiler/imports/archive.py), then read by
the language whose log it is: each pipeline names the logs it reads (`Pipeline.log_readers`), and
its reader writes the stages with the code its live jobs use (a TORCH_TRACE directory:
compiler/pytorch/imported.py; a TritonParse trace: compiler/triton/imported.py; an XLA dump:
compiler/xla/imported.py). This package imports no language's package: it finds them in the
registry.
"""
from __future__ import annotations

import importlib
import os
import re
from typing import Any

from compiler import registry
from compiler.errors import ErrorKind
from compiler.model import Request
from compiler.pipeline import JobContext, LogReader, Option, Pipeline, UserError

ARCHIVE_NAME = "archive"  # the upload's name inside the job's inputs/


def log_readers() -> dict[str, LogReader]:
    """Every kind of log a registered language reads, by kind, in the registry's order (the order
    an upload is recognised in)."""
    found: dict[str, LogReader] = {}
    for key in registry.keys():
        if registry.package(key) != "imports":
            for reader in registry.get(key).log_readers:
                found.setdefault(reader.kind, reader)
    return found


READERS = log_readers()

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
    title = "Import a log (" + ", ".join(reader.kind for reader in READERS.values()) + ")"
    accepts = ("a log made elsewhere, uploaded (`POST /api/imports`): a TORCH_TRACE directory or an XLA dump "
               "directory as .tar.gz or .zip, or a TritonParse trace")
    editor_mode = "text"
    lexer = "text"
    example = describe_upload("trace.tar.gz", "0" * 64, 0)
    made_by_upload = True
    toolchain_packages = ("torch", "triton", "jaxlib")  # the parsers read logs of these versions' format
    options = (
        Option("kind", "choice", "auto", "What the archive holds: auto (recognised by its files), "
               + ", ".join(f"{reader.kind} ({reader.title})" for reader in READERS.values()) + ".",
               choices=("auto", *READERS)),
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
        from compiler.imports import archive
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
        kind = request.options["kind"]
        if kind == "auto":
            kind = next((k for k, reader in READERS.items()
                         if importlib.import_module(reader.module).recognise(unpacked_dir, unpacked.files)), None)
            if kind is None:
                listed = ", ".join(unpacked.files[:8]) + (" ..." if len(unpacked.files) > 8 else "")
                wanted = ", ".join(reader.title for reader in READERS.values())
                raise UserError(ErrorKind.InputError, f"{name}: none of these found in it: {wanted} "
                                                      f"({len(unpacked.files)} files: {listed})")
        origin: dict[str, Any] = {"archive": name, "sha256": digest, "container": unpacked.kind,
                                  "files": len(unpacked.files), "unpacked_bytes": unpacked.bytes, "kind": kind}
        ctx.bundle.progress(f"reading the {kind.replace('_', ' ')}")
        origin.update(importlib.import_module(READERS[kind].module).read(ctx, unpacked_dir, unpacked.files))
        sentence = describe(origin)
        ctx.bundle.add("import.origin", "Where this log came from", "Import", "json", {"summary": sentence, **origin},
                       meta={"note": sentence})
        ctx.bundle.timing("target", {"imported": True, "summary": sentence, **origin})


def describe(origin: dict[str, Any]) -> str:
    """One sentence: where an imported log came from."""
    return (f"imported {origin.get('log', 'log')} from {origin.get('archive', '?')}, made by "
            f"{origin.get('made_by', '?')} on {origin.get('device', '?')}")
