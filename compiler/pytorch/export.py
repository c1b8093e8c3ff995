"""The export path: torch.export.export, then AOTInductor (aoti_compile_and_package) into a .pt2
package, which is loaded back so the same timings can be taken on what AOTInductor built."""
from __future__ import annotations

import os
import zipfile
from typing import Any

from compiler.pipeline import Bundle
from compiler.pytorch import source_map as torch_source_map


def export_and_package(model: Any, inputs: tuple, workdir: str, bundle: Bundle, user_paths: tuple[str, ...],
                       torch: Any) -> Any:
    """Export `model`, compile and package it with AOTInductor, write the export.program,
    aoti.package and aoti.wrapper stages, and return the loaded package (a callable)."""
    module = model if isinstance(model, torch.nn.Module) else _FunctionModule(model, torch)
    bundle.progress("torch.export.export")
    program = torch.export.export(module, inputs)
    readable = program.graph_module.print_readable(print_output=False, include_stride=True, include_device=True)
    text = f"{program}\n\n# graph_module.print_readable():\n{readable}"
    offset = str(program).count("\n") + 3
    pairs = [[a + offset, b] for a, b in torch_source_map.fx_code_map(readable, user_paths)[0]]
    bundle.add("export.program", "ExportedProgram", "Export", "python", text, source_map=pairs)
    bundle.progress("AOTInductor: compiling and packaging")
    package = torch._inductor.aoti_compile_and_package(program, package_path=os.path.join(workdir, "model.pt2"))
    with zipfile.ZipFile(package) as archive:
        members = archive.infolist()
        listing = "\n".join(f"{m.file_size:>12,}  {m.filename}" for m in members)
        bundle.add("aoti.package", f"Package contents ({len(members)} files)", "Export", "text",
                   f"{'bytes':>12}  path in {os.path.basename(package)}\n{listing}")
        for m in members:
            if m.filename.endswith(".wrapper.cpp") or m.filename.endswith("wrapper.cpp"):
                bundle.add("aoti.wrapper", "AOTInductor C++ wrapper", "Export", "cpp",
                           archive.read(m).decode("utf-8", "replace"), meta={"file": m.filename})
            elif m.filename.endswith(".cpp") and not bundle.has("aoti.kernels"):
                bundle.add("aoti.kernels", "AOTInductor kernels (C++)", "Export", "cpp",
                           archive.read(m).decode("utf-8", "replace"), meta={"file": m.filename})
    return torch._inductor.aoti_load_package(package)


class _FunctionModule:
    """Wraps a plain function as an nn.Module for torch.export (built lazily: torch is imported late)."""

    def __new__(cls, fn: Any, torch: Any):
        class Function(torch.nn.Module):
            def forward(self, *args):
                return fn(*args)
        return Function()
