"""The stages of what CuTe DSL compiled: `cute.ir/ir_clean/ptx/sass/metadata:<function>` per
compiled `@cute.jit` function, `cute.launches`, and the job's `kernels.resources` (one row per
kernel: a function's cubin holds every kernel it launches)."""
from __future__ import annotations

import re
from typing import Any

import msgspec

from compiler import formats, mlir_text
from compiler.cute.capture import CompiledFunction, Launch
from compiler.kernels import gpu_lines
from compiler.kernels.nvidia_tools import (
    cubin_resource_usage_by_function,
    disassemble_sass,
    parse_ptxas_log_by_function,
)
from compiler.kernels.program import users_file_names
from compiler.kernels.resources import NVIDIA_SOURCE, nvidia_row, ptx_entries, write_resource_table
from compiler.kernels.stages import IrLinks
from compiler.pipeline import Bundle
from compiler.targets import GpuTarget

GROUP = "CuTe"
_SOURCE = NVIDIA_SOURCE.replace("ptxas -v (spills)", "CuTe's ptxas report (remarks{ptx}: spills)")
# the row's cells CuTe has no value for, and why (the hover of their dash: KernelResource.why_empty)
WHY_EMPTY = {"stages": "CuTe kernels have no software-pipelining stages (num_stages is a Triton setting)",
             "config": "CuTe kernels have no autotune config or constexprs: their parameters are the "
                       "@cute.jit function's arguments and constants"}
_MANGLED = re.compile(r"_(?:tensor|Tensor|FakeTensor|ptr|Ptr|Int|Float|Uint|Boolean|Numeric|\d+$)")


def short_name(mangled: str, prefix: str) -> str:
    """The Python name in CuTe's mangled one: `kernel_cutlass_add_kernel_tensorptrf16..._0` ->
    `add_kernel` (for display; the metadata keeps the whole name)."""
    name = mangled.removeprefix(prefix)
    cut = _MANGLED.search(name)
    return name[:cut.start()] if cut and cut.start() > 0 else name


def qualifiers(compiled: list[CompiledFunction], python_names: dict[str, str]) -> list[str]:
    """`<function>` for each compile, `<function>.<n>` from a function's second compile on."""
    seen: dict[str, int] = {}
    out = []
    for function in compiled:
        base = python_names.get(function.name) or short_name(function.name, "cutlass_")
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.append(base if n == 0 else f"{base}.{n}")
    return out


def write_function_stages(bundle: Bundle, compiled: list[CompiledFunction], launches: list[Launch],
                          python_names: dict[str, str], remarks: str, path: str, workdir: str, target: GpuTarget,
                          target_info: dict[str, Any]) -> None:
    ptxas = parse_ptxas_log_by_function(remarks)
    rows: list[formats.KernelResource] = []
    names = qualifiers(compiled, python_names)
    for function, qualifier in zip(compiled, names):
        bundle.progress(f"writing stages of {qualifier}")
        base_meta = {"function": function.name, "target": target.name, "cute_arch": target_info.get("cute_arch"),
                     "virtual": target_info["virtual"]}
        # the job's copy of the editor's text, the file the IR's loc()s, the PTX's .file and the SASS name
        named = {**base_meta, "file_names": users_file_names(path)}
        located = IrLinks(qualifier, prefix="cute")
        ir_map = mlir_text.source_map(function.ir, path) if function.ir is not None else []
        ptx_map = gpu_lines.ptx_source_map(function.ptx, path) if function.ptx is not None else []
        if function.ir is not None:
            bundle.add(f"cute.ir:{qualifier}", f"CuTe IR {qualifier}", GROUP, "mlir", function.ir,
                       source_map=ir_map,
                       meta={**named, **located.meta("ir", mlir_text.line_location_chains(function.ir),
                                                         "MLIR loc() attributes"),
                             "source": "CUTE_DSL_KEEP=ir-debug: the module as traced, before any pass"})
        if function.ir_clean is not None:
            bundle.add(f"cute.ir_clean:{qualifier}", f"CuTe IR, canonicalized {qualifier}", GROUP, "mlir",
                       function.ir_clean, meta={**base_meta, "source": "CUTE_DSL_KEEP=ir: after canonicalize and "
                                                "cse; its locations name the printed module ('-'), not your file"})
        sass = ""
        if function.ptx is not None:
            bundle.add(f"cute.ptx:{qualifier}", f"PTX {qualifier}", GROUP, "ptx", function.ptx,
                       source_map=ptx_map,
                       meta={**named, **located.meta("ptx", gpu_lines.ptx_location_chains(function.ptx),
                                                         ".loc directives"),
                             "ptx_target": _first(r"^\.target\s+(\S+)", function.ptx),
                             "ptx_version": _first(r"^\.version\s+(\S+)", function.ptx)})
        usage: dict[str, dict[str, int]] = {}
        if function.cubin is not None:
            sass = disassemble_sass(function.cubin, workdir)
            bundle.add(f"cute.sass:{qualifier}", f"SASS {qualifier}", GROUP, "sass", sass,
                       source_map=gpu_lines.sass_source_map(sass, path),
                       meta={**named, **located.meta("sass", gpu_lines.sass_location_chains(sass, path),
                                                         "nvdisasm --print-line-info (file and line, no column)"),
                             "tool": "nvdisasm --print-line-info --print-code (Triton's bundled copy)"})
            usage = cubin_resource_usage_by_function(function.cubin, workdir)
        kernels, function_rows = [], []
        for kernel, threads in ptx_entries(function.ptx or ""):
            row = nvidia_row(f"{qualifier}/{short_name(kernel, 'kernel_cutlass_')}", f"cute.metadata:{qualifier}",
                             target.name, int(target.arch), target.warp_size, threads, usage.get(kernel, {}),
                             ptxas.get(kernel, {}), source=_SOURCE)
            row.lines = kernel_lines(function.ir or "", ir_map, kernel) or sorted({line for _, line in ptx_map})
            row.why_empty = dict(WHY_EMPTY)
            function_rows.append(row)
            kernels.append({"kernel": kernel, "threads_per_block": threads, "cubin_resource_usage": usage.get(kernel),
                            "ptxas": ptxas.get(kernel), "registers": row.registers,
                            "spill_stores_bytes": row.spill_stores_bytes, "spill_loads_bytes": row.spill_loads_bytes,
                            "occupancy": msgspec.to_builtins(row.occupancy) if row.occupancy else None})
        calls = [launch for launch in launches if launch.function == function.name]
        bundle.add(f"cute.metadata:{qualifier}", f"Metadata {qualifier}", GROUP, "json",
                   {"function": function.name, "target": target.name, "cute_arch": target_info.get("cute_arch"),
                    "kernels": kernels, "calls": [msgspec.to_builtins(c) for c in calls]},
                   meta={**base_meta, "spills": any(r.spills for r in function_rows)})
        rows.extend(function_rows)
    write_resource_table(bundle, rows, GROUP, note="one row per kernel of each compiled @cute.jit function")
    bundle.add("cute.launches", "Calls", "Run", "json", [msgspec.to_builtins(launch) for launch in launches],
               source_map=[], meta={"count": len(launches), **target_info,
                                    "note": "on a virtual target each call is compiled and recorded, not run"
                                    if target_info["virtual"] else "each call ran on the worker's GPU"})


def kernel_lines(ir: str, ir_map: list[list[int]], kernel: str) -> list[int]:
    """The user's lines of one kernel: those the IR's source map links from the kernel's op
    (`cuda.kernel @<kernel>(...) {` to its closing brace at the same indent); every line of the
    module when the kernel's op is not found, none without an IR."""
    text = ir.split("\n")
    start = next((n for n, line in enumerate(text, start=1) if f"@{kernel}(" in line), None)
    if start is None:
        return sorted({line for _, line in ir_map})
    indent = len(text[start - 1]) - len(text[start - 1].lstrip())
    end = next((n for n, line in enumerate(text[start:], start=start + 1)
                if line.startswith(" " * indent + "}")), len(text))
    return sorted({line for number, line in ir_map if start <= number <= end})


def _first(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text, re.M)
    return m.group(1) if m else None
