"""Theoretical occupancy of a compiled GPU kernel: how many of its blocks one multiprocessor can
hold at once, and what limits that (warps, registers, shared memory, blocks).

NVIDIA: the CUDA Occupancy Calculator's model (the arithmetic of `cuda_occupancy.h`, which
`cudaOccupancyMaxActiveBlocksPerMultiprocessor` also follows) applied to the architecture's
published limits (the CUDA C++ Programming Guide's "Technical Specifications per Compute
Capability"), with the kernel's registers per thread (ptxas / the cubin), its shared memory
(static from the cubin plus the dynamic request Triton launches with) and its warps per block.
It is an estimate of what the hardware allows, not a measurement: achieved occupancy needs a
real GPU and a profiler. AMD: LLVM's own figure, the `; Occupancy:` waves per SIMD it writes in
the AMDGCN listing.

Import-light (no torch, no triton): the web process may read it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MODEL_NVIDIA = ("theoretical, the CUDA Occupancy Calculator's model: the architecture's published limits "
                "(warps, blocks, registers and shared memory per SM; registers allocated per warp in units of "
                "256, shared memory per block in units of 128 bytes plus 1 KiB the driver reserves) against the "
                "kernel's registers, shared memory and warps; the largest shared-memory carveout")
MODEL_AMD = "LLVM's AMDGPU backend: the '; Occupancy:' waves per SIMD in the AMDGCN listing"


@dataclass(frozen=True)
class SmLimits:
    """Per-multiprocessor limits of one CUDA compute capability (the Programming Guide's table)."""

    max_warps: int
    max_blocks: int
    shared_bytes: int  # shared memory per SM, the largest carveout
    shared_per_block_optin: int  # the most one block may ask for
    registers: int = 65536
    max_registers_per_thread: int = 255
    register_unit: int = 256  # registers are allocated per warp, in units of this many
    sub_partitions: int = 4  # the register file is split between the SM's four schedulers
    shared_unit: int = 128
    shared_reserved_per_block: int = 1024  # the driver's own, per block (compute capability 8.0 and later)
    max_threads_per_block: int = 1024


KIB = 1024
# compute capability (major * 10 + minor) -> limits
SM_LIMITS: dict[int, SmLimits] = {
    80: SmLimits(max_warps=64, max_blocks=32, shared_bytes=164 * KIB, shared_per_block_optin=163 * KIB),
    86: SmLimits(max_warps=48, max_blocks=16, shared_bytes=100 * KIB, shared_per_block_optin=99 * KIB),
    87: SmLimits(max_warps=48, max_blocks=16, shared_bytes=164 * KIB, shared_per_block_optin=163 * KIB),
    89: SmLimits(max_warps=48, max_blocks=24, shared_bytes=100 * KIB, shared_per_block_optin=99 * KIB),
    90: SmLimits(max_warps=64, max_blocks=32, shared_bytes=228 * KIB, shared_per_block_optin=227 * KIB),
    100: SmLimits(max_warps=64, max_blocks=32, shared_bytes=228 * KIB, shared_per_block_optin=227 * KIB),
    120: SmLimits(max_warps=48, max_blocks=32, shared_bytes=128 * KIB, shared_per_block_optin=99 * KIB),
}
# AMD: the most waves one SIMD holds, per architecture (CDNA 2 and 3)
AMD_MAX_WAVES_PER_SIMD = {"gfx90a": 8, "gfx942": 8, "gfx950": 8}


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def nvidia(arch: int, warps_per_block: int, registers_per_thread: int, shared_bytes_per_block: int,
           warp_size: int = 32) -> dict[str, Any] | None:
    """The theoretical occupancy of a kernel on compute capability `arch`, or None when the
    architecture's limits are not in the table. `shared_bytes_per_block` is static plus dynamic."""
    lim = SM_LIMITS.get(arch)
    if lim is None or warps_per_block <= 0:
        return None
    limits: dict[str, int] = {"blocks": lim.max_blocks, "warps": lim.max_warps // warps_per_block}
    why_none = None
    if warps_per_block * warp_size > lim.max_threads_per_block:
        why_none = f"{warps_per_block * warp_size} threads per block, over the {lim.max_threads_per_block} allowed"
    if registers_per_thread > lim.max_registers_per_thread:
        why_none = f"{registers_per_thread} registers per thread, over the {lim.max_registers_per_thread} allowed"
    if registers_per_thread > 0:
        per_warp = _round_up(registers_per_thread * warp_size, lim.register_unit)
        warps_by_registers = (lim.registers // lim.sub_partitions // per_warp) * lim.sub_partitions
        limits["registers"] = warps_by_registers // warps_per_block
    shared = _round_up(shared_bytes_per_block + lim.shared_reserved_per_block, lim.shared_unit)
    if shared_bytes_per_block > lim.shared_per_block_optin:
        why_none = (f"{shared_bytes_per_block:,} bytes of shared memory per block, over the "
                    f"{lim.shared_per_block_optin:,} one block may have")
    limits["shared memory"] = lim.shared_bytes // shared
    blocks = 0 if why_none else min(limits.values())
    warps = blocks * warps_per_block
    return {"blocks_per_sm": blocks, "warps_per_sm": warps, "max_warps_per_sm": lim.max_warps,
            "percent": round(100.0 * warps / lim.max_warps, 1),
            "limited_by": [why_none] if why_none else sorted(k for k, v in limits.items() if v == blocks),
            "limits_blocks": limits, "model": MODEL_NVIDIA}


def amd(arch: str, waves_per_simd: int | None) -> dict[str, Any] | None:
    """LLVM's occupancy of an AMDGCN kernel (waves per SIMD) against the most the SIMD holds."""
    most = AMD_MAX_WAVES_PER_SIMD.get(arch)
    if most is None or waves_per_simd is None:
        return None
    return {"waves_per_simd": waves_per_simd, "max_waves_per_simd": most,
            "percent": round(100.0 * waves_per_simd / most, 1), "limited_by": [], "model": MODEL_AMD}
