"""XLA:GPU's code artifacts: the fusion decisions of an optimized module (which dots became Triton
GEMM fusions with which tiles, which became cuBLAS/cuDNN calls, which fusions XLA's own emitters
generate), the ptxas XLA used and the PTX's target, SASS of the PTX XLA dumped, and the TTIR/TTGIR
of each Triton fusion from XLA's per-pass MLIR dumps. Pure functions, except `sass_of_ptx`, which
runs the same ptxas XLA ran and the Triton wheel's nvdisasm."""
from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from typing import Any

from compiler.kernels.mlir_passes import parse_dumps
from compiler.xla.hlo_text import HloText, parse_metadata

_TRITON_KINDS = {"__triton_gemm": "Triton GEMM", "__triton_nested_gemm_fusion": "Triton GEMM (nested)",
                 "__triton": "Triton (block-level)", "__triton_scaled_dot_fusion": "Triton scaled dot"}


def _backend_config(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def fusion_decisions(module: HloText) -> list[dict[str, Any]]:
    """One record per fusion and custom call of the non-fused computations: what XLA decided to
    generate it with and, for Triton fusions, the tile config in its backend config."""
    fused = {i.attrs.get("calls", "").lstrip("%") for i in module.instructions() if i.opcode == "fusion"}
    out = []
    for comp in module.computations:
        if comp.name in fused:
            continue
        for ins in comp.instructions:
            if ins.opcode not in ("fusion", "custom-call"):
                continue
            config = _backend_config(ins.attrs.get("backend_config", ""))
            record: dict[str, Any] = {"name": ins.name, "opcode": ins.opcode, "line": ins.line,
                                      "computation": comp.name, "shape": ins.shape.split("{")[0],
                                      "op_name": parse_metadata(ins.attrs.get("metadata", "")).get("op_name", "")}
            if ins.opcode == "custom-call":
                target = ins.attrs.get("custom_call_target", "").strip('"')
                record["target"] = target
                record["decision"] = ("cuBLAS" if "cublas" in target else "cuDNN" if "cudnn" in target else
                                      f"custom call {target}")
                gemm = config.get("gemm_backend_config") or {}
                if gemm.get("selected_algorithm") is not None:
                    record["algorithm"] = gemm["selected_algorithm"]
            else:
                fusion = config.get("fusion_backend_config") or {}
                kind = fusion.get("kind") or ins.attrs.get("kind", "")
                record["kind"] = kind
                record["decision"] = _TRITON_KINDS.get(kind, f"XLA emitter ({ins.attrs.get('kind', kind)})")
                tiling = fusion.get("block_level_fusion_config") or fusion.get("triton_gemm_config")
                if tiling:
                    record["tiling"] = tiling
                if fusion.get("custom_fusion_config"):
                    record["custom_fusion"] = fusion["custom_fusion_config"]
            out.append(record)
    return out


def _tiles(tiling: dict[str, Any]) -> str:
    if "output_tiles" in tiling:
        tiles = " ".join("x".join(str(s) for s in t.get("sizes", [])) for t in tiling["output_tiles"])
        return f"tiles {tiles}, warps {tiling.get('num_warps')}, stages {tiling.get('num_stages')}, " \
               f"ctas {tiling.get('num_ctas')}"
    keys = ("block_m", "block_n", "block_k", "split_k", "num_stages", "num_warps", "num_ctas")
    return ", ".join(f"{k} {tiling[k]}" for k in keys if k in tiling)


def render_decisions(records: list[dict[str, Any]]) -> str:
    """The decisions as a table: instruction, decision, config, the JAX op it came from."""
    width = max([len(r["name"]) for r in records] + [11])
    header = f"{'instruction':<{width}}  {'decision':<28} {'config':<56} op"
    rows = [header, "-" * len(header)]
    for r in records:
        config = (_tiles(r["tiling"]) if "tiling" in r else r.get("target", "") if r["opcode"] == "custom-call"
                  else "")
        rows.append(f"{r['name']:<{width}}  {r['decision']:<28} {config:<56} {r['op_name']}")
    return "\n".join(rows) + "\n"


def cuda_data_dir(debug_options_text: str) -> str | None:
    """`xla_gpu_cuda_data_dir` from the `*.debug_options` dump file: where XLA found ptxas."""
    m = re.search(r'^xla_gpu_cuda_data_dir:\s*"([^"]*)"', debug_options_text, re.M)
    return m.group(1) if m else None


def ptx_target(ptx: str) -> str | None:
    """The `.target` of a PTX module: "sm_90a"."""
    m = re.search(r"^\s*\.target\s+([\w]+)", ptx, re.M)
    return m.group(1) if m else None


def sass_of_ptx(ptx: str, ptxas: str, workdir: str) -> tuple[str, str, list[dict[str, Any]]]:
    """(SASS listing, what ran, each kernel's resources): the PTX assembled by `ptxas` for its own
    `.target` (as XLA assembles it; `-v` prints what each kernel uses and changes nothing of the
    cubin), then listed by nvidia's tools from the Triton wheel (compiler/kernels/nvidia_tools.py); per
    kernel its threads per block, the cubin's resource usage and ptxas's report."""
    from compiler.kernels.nvidia_tools import (
        cubin_resource_usage_by_function,
        disassemble_sass,
        parse_ptxas_log_by_function,
    )
    from compiler.kernels.resources import ptx_entries
    arch = ptx_target(ptx)
    if arch is None:
        return "// the PTX names no .target\n", "", []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        src, out = os.path.join(tmp, "module.ptx"), os.path.join(tmp, "module.cubin")
        with open(src, "w", encoding="utf-8") as f:
            f.write(ptx)
        command = [ptxas, "-v", src, "-o", out, f"-arch={arch}"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            return f"// ptxas failed:\n{done.stderr}", " ".join(command), []
        with open(out, "rb") as f:
            cubin = f.read()
    report = parse_ptxas_log_by_function(done.stdout + done.stderr)
    usage = cubin_resource_usage_by_function(cubin, workdir)
    kernels = [{"kernel": name, "threads_per_block": threads, "cubin_resource_usage": usage.get(name, {}),
                "ptxas": report.get(name, {})} for name, threads in ptx_entries(ptx)]
    return disassemble_sass(cubin, workdir), f"ptxas -v {os.path.basename(src)} -arch={arch}", kernels


def triton_ir(pass_dump: str) -> dict[str, Any]:
    """TTGIR and the pass list out of one Triton fusion's per-pass MLIR dump: TTGIR is the module as
    the last pass that still sees `tt.func` received it, before the lowering to LLVM."""
    dumps = parse_dumps(pass_dump)
    ttgir = ""
    for d in dumps:
        if "tt.func" in d.ir and "ttg." in d.ir:
            ttgir = d.ir
    return {"ttgir": ttgir.strip() + "\n" if ttgir else "", "passes": [d.name for d in dumps]}
