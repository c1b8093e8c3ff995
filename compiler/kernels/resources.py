"""What a compiled GPU kernel uses, as a row of the job's `kernels.resources` table: registers,
spills, stack, local and shared memory from the compilers' own outputs, and the theoretical
occupancy on the target (compiler/targets/occupancy.py). Shared by every pipeline that compiles
GPU kernels: Triton's kernels (compiler/kernels/stages.py, with Triton's metadata), CuTe
DSL's and XLA:GPU's (a PTX module's entries with the cubin's figures, `nvidia_rows`)."""
from __future__ import annotations

import math
import re
from typing import Any

import msgspec

from compiler import formats
from compiler.pipeline import Bundle
from compiler.targets import occupancy

NVIDIA_SOURCE = ("cuobjdump --dump-resource-usage of the cubin (REG, SHARED, LOCAL, STACK), ptxas -v (spills), "
                 "the PTX's .reqntid / .maxntid (threads per block); occupancy counts static shared memory "
                 "only: the dynamic shared memory of a launch is not in the cubin")


def ptx_entries(ptx: str) -> list[tuple[str, int | None]]:
    """Each kernel of a PTX module with its threads per block (`.reqntid` / `.maxntid`), in order."""
    out = []
    for m in re.finditer(r"^\.visible \.entry (\S+?)\(", ptx, re.M):
        after = ptx[m.end():m.end() + 20000]
        body_start = after.find("{")
        dims = re.search(r"\.(?:reqntid|maxntid)\s+([\d,\s]+)", after[:body_start if body_start >= 0 else None])
        threads = math.prod(int(d) for d in dims.group(1).replace(" ", "").split(",") if d) if dims else None
        out.append((m.group(1), threads))
    return out


def occupancy_record(estimate: dict[str, Any] | None) -> formats.Occupancy | None:
    return msgspec.convert(estimate, formats.Occupancy) if estimate else None


def nvidia_row(kernel: str, stage: str, target: str, arch: int, warp_size: int, threads: int | None,
               usage: dict[str, int], ptxas: dict[str, int], source: str = NVIDIA_SOURCE) -> formats.KernelResource:
    """One NVIDIA kernel's row from the cubin's resource usage (`cubin_resource_usage_by_function`)
    and ptxas -v's report of it (`parse_ptxas_log_by_function`); `kernel` is the row's label, `stage`
    the stage it links to, `arch` the compute capability (90)."""
    warps = math.ceil(threads / warp_size) if threads else None
    registers = usage.get("REG", ptxas.get("registers"))
    static = usage.get("SHARED", ptxas.get("shared_bytes_static"))
    stores, loads = ptxas.get("spill_stores_bytes"), ptxas.get("spill_loads_bytes")
    occ = None
    if registers is not None and warps:
        occ = occupancy_record(occupancy.nvidia(arch, warps, int(registers), int(static or 0), warp_size))
    return formats.KernelResource(
        kernel=kernel, stage=stage, target=target, num_warps=warps, registers=registers, spill_stores_bytes=stores,
        spill_loads_bytes=loads, stack_bytes=usage.get("STACK", ptxas.get("stack_frame_bytes")),
        local_bytes=usage.get("LOCAL"), static_shared_bytes=static, spills=bool(stores or loads), occupancy=occ,
        source=source)


def write_resource_table(bundle: Bundle, rows: list[formats.KernelResource], group: str, note: str = "",
                         title: str = "All kernels", explained_as: str = "") -> None:
    """`kernels.resources`, "All kernels": one row per compiled kernel (each config its own), spilling
    ones flagged; titled for the whole group, not one kernel of its picker."""
    if not rows:
        return
    meta = {"count": len(rows), "spilling": [r.kernel for r in rows if r.spills]}
    if explained_as:  # its explanation's variant (viewers/explanations.py)
        meta["explained_as"] = explained_as
    bundle.add("kernels.resources", title, group, "resources", formats.KernelResources(kernels=rows, note=note),
               meta=meta)
