"""Device targets: the GPU targets irscope compiles for, real or virtual.

This module is import-light (no torch, no triton): the web process reads the target names from it
for option schemas. The virtual-device shim is `compiler.targets.virtual_gpu` and nowhere else.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GpuTarget:
    """One GPU target: a Triton `GPUTarget(backend, arch, warp_size)` plus the device properties
    PyTorch/Inductor would read from a real device of that kind (published figures of one product
    of the architecture; Inductor uses them for heuristics such as SM count and shared memory)."""

    name: str  # the option value: "cuda:sm_90"
    backend: str  # Triton backend: "cuda" or "hip"
    arch: int | str  # 90 or "gfx942"
    warp_size: int
    product: str  # the device whose properties are reported
    multi_processor_count: int
    shared_memory_per_block_optin: int
    l2_cache_size: int
    total_memory: int
    regs_per_multiprocessor: int = 65536
    max_threads_per_multi_processor: int = 2048

    @property
    def is_cuda(self) -> bool:
        return self.backend == "cuda"

    @property
    def capability(self) -> tuple[int, int]:
        """(major, minor) for CUDA targets."""
        assert isinstance(self.arch, int), self.name
        return divmod(self.arch, 10)


GIB = 2**30
MIB = 2**20

# The choices of the `target` option, in the order the page lists them.
TARGETS: dict[str, GpuTarget] = {t.name: t for t in (
    GpuTarget("cuda:sm_80", "cuda", 80, 32, "virtual NVIDIA A100-SXM4-80GB (sm_80)", 108, 166912, 40 * MIB, 80 * GIB),
    GpuTarget("cuda:sm_90", "cuda", 90, 32, "virtual NVIDIA H100 80GB HBM3 (sm_90)", 132, 232448, 50 * MIB, 80 * GIB),
    GpuTarget("cuda:sm_100", "cuda", 100, 32, "virtual NVIDIA B200 (sm_100)", 148, 232448, 126 * MIB, 180 * GIB),
    GpuTarget("hip:gfx942", "hip", "gfx942", 64, "virtual AMD Instinct MI300X (gfx942)", 304, 65536, 4 * MIB,
              192 * GIB),
)}

DEFAULT_VIRTUAL_TARGET = "cuda:sm_90"


def resolve(name: str, present: list[str] | tuple[str, ...] = ()) -> str:
    """A target option's value as the target a job compiles for: `auto` is the first of `present`
    (the device a worker has; in the worker tier, the queues live workers serve), else the default
    virtual target; any other value is itself. The one rule for `auto`, for pipelines and routing."""
    if name != "auto":
        return name
    return present[0] if present else DEFAULT_VIRTUAL_TARGET


def get_target(name: str) -> GpuTarget:
    """The target called `name`; an unknown name is a KeyError listing the known ones."""
    if name not in TARGETS:
        raise KeyError(f"unknown GPU target {name!r}; known: {', '.join(TARGETS)}")
    return TARGETS[name]


def is_gpu_target(name: str) -> bool:
    return name in TARGETS or name == "auto"


def describe_target(target: GpuTarget, executed: bool, real: str | None,
                    device_name: str | None = None) -> dict[str, Any]:
    """What a result says about where it was compiled and whether anything ran. `real` is the
    worker's own device target (None without one); `device_name` is that device's name as the
    driver reports it, given when the job ran on it."""
    info: dict[str, Any] = {"name": target.name, "backend": target.backend, "arch": target.arch,
                            "warp_size": target.warp_size, "virtual": not executed, "executed": executed,
                            "worker_device": real}
    if executed:
        info["device"] = device_name
        info["note"] = "ran on the worker's GPU; launch times from triton.testing.do_bench"
    else:
        info["device"] = target.product
        info["note"] = "virtual target: compiled only, nothing ran, no timings exist"
    return info
