"""The stages of one compiled Triton kernel: `triton.source/ttir/ttgir/llir/ptx|amdgcn/sass/passes/
metadata:<qualifier>`, each with its source map, written from a CompiledRecord (compiler/triton/
capture.py). A library: the triton pipeline and the PyTorch GPU path both write kernels with it.
"""
from __future__ import annotations

import os
import re
from typing import Any, Callable

import msgspec

from compiler import formats, mlir_text
from compiler.kernels import gpu_lines, mlir_passes
from compiler.kernels.capture import MLIR_STAGES, CompiledRecord
from compiler.kernels.nvidia_tools import cubin_resource_usage, disassemble_sass, parse_ptxas_log
from compiler.kernels.resources import occupancy_record
from compiler.pipeline import Bundle
from compiler.targets import occupancy

# The PTX stage's note, shown on the page as its first sentence with the rest folded under it
# (compiler/kernels/gpu_lines.ptx_source_map is the rule it describes).
PTX_NOTE = ("Each PTX line is linked to the source line named by the .loc directive above it, and every line "
            "of an inline-asm block (between \"// begin inline asm\" and \"// end inline asm\") is linked to "
            "the source line of the .loc just before the block. LLVM numbers the lines of an inline-asm "
            "string as if they were lines of your source file, so the .loc lines inside a block name lines "
            "that are not really there; irscope does not use them.")

# The SASS stage's note, as the PTX one: a first sentence that says what a reader sees, the why folded.
SASS_NOTE = ("A SASS line from inline asm may name a source line below the real one, past the kernel's end "
             "even. LLVM numbers the lines of an inline-asm string as source lines and ptxas keeps them; such "
             "lines are mapped back through the PTX's inline-asm blocks where that is unambiguous, else left "
             "unmapped.")


def _first_ints(patterns: dict[str, str], text: str) -> dict[str, int]:
    """name -> the integer the first match of its pattern captures, for the patterns that match."""
    found = {key: re.search(pattern, text) for key, pattern in patterns.items()}
    return {key: int(m.group(1)) for key, m in found.items() if m}


def parse_amdgcn_usage(asm: str) -> dict[str, int]:
    """Register counts, spills, scratch, LDS and occupancy from the AMDGCN listing's metadata."""
    patterns = {"sgpr_count": r"\.sgpr_count:\s+(\d+)", "vgpr_count": r"\.vgpr_count:\s+(\d+)",
                "agpr_count": r"\.agpr_count:\s+(\d+)", "sgpr_spill_count": r"\.sgpr_spill_count:\s+(\d+)",
                "vgpr_spill_count": r"\.vgpr_spill_count:\s+(\d+)",
                "private_segment_bytes": r"\.private_segment_fixed_size:\s+(\d+)",
                "lds_bytes": r"\.group_segment_fixed_size:\s+(\d+)", "occupancy_waves": r";\s*Occupancy:\s+(\d+)"}
    return _first_ints(patterns, asm)


def write_kernel_stages(bundle: Bundle, record: CompiledRecord, qualifier: str, workdir: str,
                        source_map_file: str, python_source: tuple[str, int] | None = None,
                        map_to_user: Callable[[int], int | None] | None = None,
                        extra_meta: dict[str, Any] | None = None, group: str = "Triton",
                        disassembly: Callable[[], str | None] | None = None,
                        users_file: bool = False,
                        file_names: list[dict[str, str]] | None = None) -> formats.KernelResource:
    """Write `triton.source/ttir/ttgir/llir/ptx|amdgcn/sass/passes/metadata:<qualifier>`; returns
    the kernel's row of the job's resource table (compiler/kernels/resources.py: `write_resource_table`).

    `source_map_file` is the file the compiler's locations must name for a line to be mapped.
    `python_source` is (text, first line in that file) for `triton.source`. `map_to_user` turns a
    line of that file into a line of the user's pasted source (identity when it is that source);
    lines it returns None for stay unmapped. `disassembly`, where the caller started nvdisasm on
    the cubin already (`disassemble_sass`), waits for its listing; it is asked once the stages
    before SASS are written (else nvdisasm runs here then). `users_file`: the mapped lines are the
    user's own (not a generated module's), so the row names them (`KernelResource.lines`).
    `file_names` says what files the compiler's text names that are not the user's (Helion's
    generated module): every stage's meta `file_names`, shown beside the stage; the text is the
    compiler's, unchanged.
    """
    to_user = map_to_user or (lambda line: line)

    def user_map(pairs: gpu_lines.SourceMap) -> gpu_lines.SourceMap:
        out = []
        for artifact_line, line in pairs:
            mapped = to_user(line)
            if mapped:
                out.append([artifact_line, mapped])
        return out

    base_meta = {"kernel": record.name, "hash": record.hash, "target": _target_name(record.metadata.get("target")),
                 **(extra_meta or {}), **({"file_names": file_names} if file_names else {})}
    located = IrLinks(qualifier)
    user_lines: set[int] = set()

    if python_source is not None:
        text, first = python_source
        pairs = [[i, first + i - 1] for i in range(1, len(text.splitlines()) + 1)]
        bundle.add(f"triton.source:{qualifier}", f"Kernel source {qualifier}", group, "python", text,
                   source_map=user_map(pairs), meta=base_meta)

    for ext, title in (("ttir", "TTIR"), ("ttgir", "TTGIR")):
        text = record.asm(ext)
        if isinstance(text, str):
            mapped = user_map(mlir_text.source_map(text, source_map_file))
            if not user_lines:  # TTIR's; Gluon starts at TTGIR
                user_lines = {line for _, line in mapped}
            bundle.add(f"triton.{ext}:{qualifier}", f"{title} {qualifier}", group, "mlir", text, source_map=mapped,
                       meta={**base_meta, **located.meta(ext, mlir_text.line_location_chains(text),
                                                         "MLIR loc() attributes (#loc aliases, call sites, "
                                                         "fused and name locations)")})
    llir = record.asm("llir")
    llir_lines: set[int] = set()
    if isinstance(llir, str):
        llir_map = gpu_lines.llvm_source_map(llir, source_map_file)
        llir_lines = gpu_lines.source_lines(llir_map)
        bundle.add(f"triton.llir:{qualifier}", f"LLVM IR {qualifier}", group, "llvm", llir,
                   source_map=user_map(llir_map),
                   meta={**base_meta, **located.meta("llir", gpu_lines.llvm_location_chains(llir),
                                                     "!dbg DILocations and their inlinedAt call sites")})
    ptx = record.asm("ptx")
    if isinstance(ptx, str):
        bundle.add(f"triton.ptx:{qualifier}", f"PTX {qualifier}", group, "ptx", ptx,
                   source_map=user_map(gpu_lines.ptx_source_map(ptx, source_map_file)),
                   meta={**base_meta, **located.meta("ptx", gpu_lines.ptx_location_chains(ptx),
                                                     ".loc directives and their inlined_at call sites"),
                         "ptx_target": _first(r"^\.target\s+(\S+)", ptx),
                         "ptx_version": _first(r"^\.version\s+(\S+)", ptx),
                         "note": PTX_NOTE})
    amdgcn = record.asm("amdgcn")
    if isinstance(amdgcn, str):
        bundle.add(f"triton.amdgcn:{qualifier}", f"AMDGCN {qualifier}", group, "amdgcn", amdgcn,
                   source_map=user_map(gpu_lines.ptx_source_map(amdgcn, source_map_file)),
                   meta={**base_meta, **located.meta("amdgcn", gpu_lines.ptx_location_chains(amdgcn),
                                                     ".loc directives")})

    cubin = record.asm("cubin")
    usage: dict[str, int] = {}
    if isinstance(cubin, bytes):
        sass = disassembly() if disassembly is not None else None
        if sass is None:
            sass = disassemble_sass(cubin, workdir)
        asm_lines = gpu_lines.ptx_inline_asm_lines(ptx, source_map_file) if isinstance(ptx, str) else None
        bundle.add(f"triton.sass:{qualifier}", f"SASS {qualifier}", group, "sass", sass,
                   source_map=user_map(gpu_lines.sass_source_map(sass, source_map_file, llir_lines or None, asm_lines)),
                   meta={**base_meta, **located.meta("sass", gpu_lines.sass_location_chains(
                             sass, source_map_file, llir_lines or None, asm_lines),
                             "nvdisasm --print-line-info (file and line, no column)"),
                         "tool": "nvdisasm --print-line-info --print-code (Triton's bundled copy)",
                         "note": SASS_NOTE})
        usage = cubin_resource_usage(cubin, workdir)

    stages = []
    for ext in MLIR_STAGES:
        path = record.dump_paths.get(ext)
        if path and os.path.exists(path) and ext in record.final_ir:
            with open(path, encoding="utf-8", errors="replace") as f:
                stages.append((ext, f.read(), record.final_ir[ext]))
    records = mlir_passes.pass_records(stages)
    if records:
        summary = [{"index": r.index, "stage": r.stage, "name": r.name, "argument": r.argument, "op": r.op,
                    "changed": r.changed, "only_locations": r.only_locations, "added": r.added,
                    "removed": r.removed} for r in records]
        bundle.add(f"triton.passes:{qualifier}", f"MLIR passes {qualifier}", group, "diff",
                   mlir_passes.render_pass_log(records),
                   meta={**base_meta, "passes": summary, "count": len(records),
                         "changed": sum(1 for r in records if r.changed),
                         "source": "MLIR_ENABLE_DUMP=1 per-pass dumps (IR before each pass); the IR after a "
                                   "stage's last pass is the module Triton kept; diffs drop loc() attributes"})

    md = record.metadata
    metadata = {
        "kernel": record.name, "target": base_meta["target"], "hash": record.hash,
        "num_warps": md.get("num_warps"), "num_stages": md.get("num_stages"), "num_ctas": md.get("num_ctas"),
        "warp_size": md.get("warp_size"), "maxnreg": md.get("maxnreg"),
        # Triton's dynamic shared-memory request at launch; cuobjdump's SHARED below is the cubin's
        # static shared memory (on sm_90+ it includes the 1 KiB the driver reserves)
        "shared_memory_bytes": md.get("shared"),
        "tmem_size": md.get("tmem_size"), "global_scratch_size": md.get("global_scratch_size"),
        "constexprs": record.constants, "signature": record.signature,
        "compile_times_ms": {k: round(v / 1000.0, 3) for k, v in record.times_us.items()},
        "compile_total_ms": round(sum(record.times_us.values()) / 1000.0, 3),
    }
    if record.dumps_skipped:
        metadata["mlir_passes"] = (f"not kept: this process had kept {record.dumps_skipped >> 20} MiB of per-pass "
                                   "dumps already (the pass_dump_mb setting; the job's disk is finite), so this "
                                   "kernel compiled without them; compile it alone, or fewer autotune configs, to see "
                                   "its passes")
    if usage or record.ptxas_log:
        metadata["cubin_resource_usage"] = usage  # cuobjdump --dump-resource-usage
        metadata["ptxas"] = parse_ptxas_log(record.ptxas_log)
        metadata["ptxas_log"] = record.ptxas_log.strip()
        metadata["registers"] = usage.get("REG", metadata["ptxas"].get("registers"))
        metadata["spill_stores_bytes"] = metadata["ptxas"].get("spill_stores_bytes")
        metadata["spill_loads_bytes"] = metadata["ptxas"].get("spill_loads_bytes")
    if isinstance(amdgcn, str):
        metadata["amdgcn_usage"] = parse_amdgcn_usage(amdgcn)
        metadata["registers"] = metadata["amdgcn_usage"].get("vgpr_count")
    row = resource_row(record, qualifier, metadata, f"triton.metadata:{qualifier}")
    if users_file:
        row.lines = sorted(user_lines)
    if row.occupancy is not None:
        metadata["occupancy"] = msgspec.to_builtins(row.occupancy)
    metadata.update({k: v for k, v in (extra_meta or {}).items() if k not in metadata})
    bundle.add(f"triton.metadata:{qualifier}", f"Metadata {qualifier}", group, "json",
               metadata, meta={**base_meta, "spills": row.spills})
    return row


def resource_row(record: CompiledRecord, qualifier: str, metadata: dict[str, Any],
                 stage: str) -> formats.KernelResource:
    """What one compiled kernel uses, from the compiler's own outputs (the cubin's resource usage,
    ptxas -v, Triton's metadata, the AMDGCN listing's metadata), and its theoretical occupancy."""
    target = metadata["target"]
    warps = metadata.get("num_warps")
    dynamic = metadata.get("shared_memory_bytes")
    config = {k: v for k, v in (record.constants or {}).items() if isinstance(v, (int, float, str, bool))}
    if metadata.get("maxnreg"):
        config["maxnreg"] = metadata["maxnreg"]
    common = {"kernel": qualifier, "stage": stage, "target": target, "num_warps": warps,
              "num_stages": metadata.get("num_stages"), "config": config, "dynamic_shared_bytes": dynamic}
    amd = metadata.get("amdgcn_usage")
    if amd is not None:
        spills = bool(amd.get("vgpr_spill_count") or amd.get("sgpr_spill_count"))
        arch = target.split(":", 1)[1]
        return formats.KernelResource(
            **common, registers=amd.get("vgpr_count"), sgprs=amd.get("sgpr_count"),
            local_bytes=amd.get("private_segment_bytes"), static_shared_bytes=amd.get("lds_bytes"), spills=spills,
            occupancy=occupancy_record(occupancy.amd(arch, amd.get("occupancy_waves"))),
            source="the AMDGCN listing's kernel metadata (.vgpr_count, .sgpr_count, spill counts, "
                   ".private_segment_fixed_size, .group_segment_fixed_size) and LLVM's '; Occupancy:'")
    usage, ptxas = metadata.get("cubin_resource_usage") or {}, metadata.get("ptxas") or {}
    registers = metadata.get("registers")
    stores, loads = metadata.get("spill_stores_bytes"), metadata.get("spill_loads_bytes")
    static = usage.get("SHARED", ptxas.get("shared_bytes_static"))
    occ = None
    if target.startswith("cuda:sm_") and registers is not None and warps:
        arch = int(re.sub(r"\D", "", target.split("_", 1)[1]) or 0)
        occ = occupancy_record(occupancy.nvidia(arch, int(warps), int(registers),
                                                int(static or 0) + int(dynamic or 0),
                                                int(metadata.get("warp_size") or 32)))
    return formats.KernelResource(
        **common, registers=registers, spill_stores_bytes=stores, spill_loads_bytes=loads,
        stack_bytes=usage.get("STACK", ptxas.get("stack_frame_bytes")), local_bytes=usage.get("LOCAL"),
        static_shared_bytes=static, spills=bool(stores or loads), occupancy=occ,
        source="cuobjdump --dump-resource-usage of the cubin (REG, SHARED, LOCAL, STACK), ptxas -v (spills), "
               "Triton's metadata (num_warps, the dynamic shared memory of the launch)")


class IrLinks:
    """The IR location maps of one kernel's stages as they are written, and how many located lines
    of each stage link to a line of each earlier stage (`meta["ir_links"]`, shown on the page).
    A stage is `<prefix>.<ext>:<qualifier>` (`triton.ptx:add_kernel`, `cute.ptx:add`)."""

    _TITLES = {"ttir": "TTIR", "ttgir": "TTGIR", "llir": "LLVM IR", "ptx": "PTX", "amdgcn": "AMDGCN", "sass": "SASS",
               "ir": "CuTe IR"}

    def __init__(self, qualifier: str, prefix: str = "triton"):
        self.qualifier = qualifier
        self.prefix = prefix
        self.earlier: list[tuple[str, set[str]]] = []  # (ext, chains of that stage)

    def meta(self, ext: str, chains_by_line: dict[int, list[mlir_text.Chain]], source: str) -> dict[str, Any]:
        record = formats.ir_locations(chains_by_line, source)
        if not record.chains:
            return {}
        by_line = record.by_line()
        links = []
        for earlier_ext, earlier in self.earlier:
            reach = {c: any(formats.chains_linked(c, e) for e in earlier) for c in record.chains}
            linked = sum(1 for chains in by_line.values() if any(reach[c] for c in chains))
            links.append({"stage": f"{self.prefix}.{earlier_ext}:{self.qualifier}", "title": self._TITLES[earlier_ext],
                          "linked_lines": linked, "located_lines": len(by_line)})
        self.earlier.append((ext, set(record.chains)))
        return {"ir_locations": msgspec.to_builtins(record), "ir_links": links}


def _target_name(target: Any) -> str:
    """'cuda:sm_90' / 'hip:gfx942' from Triton's GPUTarget (or its dict form)."""
    if isinstance(target, dict):
        backend, arch = target.get("backend"), target.get("arch")
    else:
        backend, arch = getattr(target, "backend", None), getattr(target, "arch", None)
    return f"cuda:sm_{arch}" if backend == "cuda" else f"{backend}:{arch}"


def _first(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text, re.M)
    return m.group(1) if m else None
