"""An XLA dump directory made elsewhere (`--xla_dump_to`, the `import` language): pass snapshots,
buffer assignment and memory, kernels, written by compiler/xla/dump_stages.py as the XLA pipelines
write them."""
from __future__ import annotations

import os
import re
from typing import Any

from compiler.errors import ErrorKind
from compiler.pipeline import JobContext, UserError
from compiler.xla import dump_index, dump_stages


def recognise(root: str, files: list[str]) -> bool:
    return dump_index.index_dump(os.path.basename(f) for f in files) is not None


def read(ctx: JobContext, root: str, files: list[str]) -> dict[str, Any]:
    """The stages of an XLA dump directory, as the XLA pipelines write them (dump_stages)."""
    # A dump holds every module the program compiled (JAX compiles small helpers too): the one with
    # the most pass snapshots is the program's own; the others are listed.
    best: tuple[int, str, list[str]] | None = None
    modules: list[str] = []
    for folder in sorted({os.path.dirname(f) for f in files}):
        names = [os.path.basename(f) for f in files if os.path.dirname(f) == folder]
        by_module: dict[str, list[str]] = {}
        for name in names:
            m = re.match(r"^(module_\d+\.[^.]+)\.", name)
            if m:
                by_module.setdefault(m.group(1), []).append(name)
        for module, members in by_module.items():
            modules.append(module)
            snapshots = sum(1 for n in members if dump_index.parse_snapshot_name(n) is not None)
            if best is None or snapshots > best[0]:
                best = (snapshots, folder, members)
    index = dump_index.index_dump(best[2]) if best else None
    if best is None or index is None:
        raise UserError(ErrorKind.InputError, "no XLA dump in the upload: a dump directory holds "
                                              "module_*.before_optimizations.txt and the pass snapshots of "
                                              "--xla_dump_to")
    directory = os.path.join(root, best[1])
    written = dump_stages.write_dump_stages(ctx.bundle, index, directory)
    names = " ".join(os.listdir(directory))
    platform = "a GPU" if re.search(r"\.(?:ptx|sm_\d+)", names) or "gpu" in names.lower() else "the CPU"
    return {"log": "XLA dump", "made_by": "XLA (a dump names no version)", "module": index.prefix,
            "device": platform, "stages": written, "other_modules": [m for m in modules if m != index.prefix][:50]}
