"""The kernel languages' toolchain cache (Triton, Gluon, Helion, CuTe DSL): the virtual CUDA
device's C++ half alone (compiler/targets/virtual_cuda.cpp, built by g++ against torch's headers:
a job waits 2.3-2.5 s for it on a quiet 2-core host, 10 s and more while other jobs compile).
Without it every job on a virtual CUDA target, and every spare, builds its own. A trusted warm-up
job builds it once per torch, toolchain and host at start-up, for every kernel language at once
(Pipeline.shared_toolchain_cache; service/toolchain_cache.py), running none of its source; later
jobs and spares load it from the cache (virtual_gpu.runtime_for_job). A job never waits for the
warm-up: one that arrives before the cache exists builds its own library, as it would without one.
"""
from __future__ import annotations

from typing import Any

from compiler.targets.virtual_gpu import RUNTIME_WARM_UP


class VirtualDeviceCache:
    """What a kernel language's Pipeline takes for this cache (listed before Pipeline in its bases)."""

    warmup_source = RUNTIME_WARM_UP
    shared_toolchain_cache = ("virtual-cuda", ("torch",))  # one for every kernel language

    def uses_toolchain_cache(self, request: Any) -> bool:
        return False

    @staticmethod
    def exported(ctx: Any) -> bool:
        """True when this job is the warm-up (ctx.export_toolchain_cache): the library is built
        into the cache it exports, and the job ends there."""
        if not ctx.export_toolchain_cache:
            return False
        from compiler.targets import virtual_gpu
        virtual_gpu.export_runtime(ctx.export_toolchain_cache)
        return True
