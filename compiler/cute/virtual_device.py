"""What CuTe DSL's examples ask of the CUDA driver before they compile, answered on a virtual
target, which has no driver and no device:

- `cutlass.cuda.initialize_cuda_context()` (the driver's context on device 0): there is none, None;
- `cutlass.cuda.stream_sync(stream)` (after a launch, as `torch.cuda.synchronize()`): nothing ran, so
  there is nothing to wait for;
- CUDA Python's `cuInit` and `cuDeviceGetCount` (`cuda.bindings.driver`, how CUTLASS's Blackwell
  tutorials check for a GPU before they start): initialized, one device, as `torch.cuda` answers;
- CUDA Python's runtime memory calls (`cuda.bindings.runtime`: `cudaMalloc`, `cudaMemset`,
  `cudaFree`, `cudaDeviceSynchronize`; CUTLASS's cooperative-launch tutorial allocates its grid
  barrier so): `cudaMalloc` gives an address of its own on the virtual GPU that no driver gave
  (aligned, each allocation apart from the others), so a pointer made from it compiles as one in
  global memory; nothing is allocated, written or read there, and the notice says so;
- `cutlass.utils.HardwareInfo` (CUTLASS's persistent GEMMs size their grid, often a compile-time
  constant, with `get_max_active_clusters(cluster_size)`): the SM count and L2 size are the
  target's published figures (compiler/targets); the most clusters resident at once is estimated
  as SMs ÷ cluster size, an upper bound (a driver counts the clusters each GPC holds and may answer
  fewer), and the notice says so at the user's line.
"""
from __future__ import annotations

import contextlib
import re
from typing import Any, Iterator

from compiler.targets import GpuTarget


@contextlib.contextmanager
def answered(target: GpuTarget, checks: Any) -> Iterator[None]:
    """The driver's questions answered for `target` while the context is open; each answer a
    notice of `checks` (compiler/kernels/virtual_checks.py) at the line that asked."""
    from unittest import mock

    import cutlass.cuda
    import cutlass.utils
    import cutlass.utils.hardware_info as hardware_info
    from cuda.bindings import driver, runtime
    info = _hardware_info_class(target, checks)
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(cutlass.cuda, "initialize_cuda_context", lambda *args, **kwargs: None))
        stack.enter_context(mock.patch.object(cutlass.cuda, "stream_sync", lambda stream: None))
        success = driver.CUresult.CUDA_SUCCESS
        stack.enter_context(mock.patch.object(driver, "cuInit", lambda flags: (success,)))
        stack.enter_context(mock.patch.object(driver, "cuDeviceGetCount", lambda: (success, 1)))
        for name, answer in _runtime_memory(checks).items():
            stack.enter_context(mock.patch.object(runtime, name, answer))
        stack.enter_context(mock.patch.object(cutlass.utils, "HardwareInfo", info))
        stack.enter_context(mock.patch.object(hardware_info, "HardwareInfo", info))
        yield


# Where the virtual GPU's addresses begin: in no range a host allocation of this process uses.
_VIRTUAL_ADDRESS_BASE = 0x7E00_0000_0000
_ALIGNMENT = 256  # what cudaMalloc guarantees


def _runtime_memory(checks: Any) -> dict[str, Any]:
    """`cuda.bindings.runtime`'s memory calls on the virtual GPU (module docstring)."""
    from cuda.bindings import runtime
    success = runtime.cudaError_t.cudaSuccess
    end = [_VIRTUAL_ADDRESS_BASE]

    def malloc(size: int) -> tuple[Any, int]:
        address = end[0]
        end[0] += max(_ALIGNMENT, -(-int(size) // _ALIGNMENT) * _ALIGNMENT)
        checks.note("cuda.bindings.runtime.cudaMalloc",
                    f"{address:#x}: an address of the virtual GPU for {int(size)} bytes, given by no driver; "
                    "nothing is allocated, written or read there")
        return success, address

    def memset(address: Any, value: int, count: int) -> tuple[Any]:
        checks.note("cuda.bindings.runtime.cudaMemset", "not written: nothing is stored on the virtual GPU")
        return (success,)

    return {"cudaMalloc": malloc, "cudaMemset": memset, "cudaFree": lambda address: (success,),
            "cudaDeviceSynchronize": lambda: (success,)}


def _hardware_info_class(target: GpuTarget, checks: Any) -> type:
    device = re.sub(r" \(.*\)$", "", target.product.removeprefix("virtual "))  # "NVIDIA H100 80GB HBM3"

    class HardwareInfo:
        """cutlass.utils.HardwareInfo on the virtual `target` (module docstring)."""

        def __init__(self, device_id: int = 0):
            if device_id != 0:
                raise ValueError(f"Device ID {device_id} is out of range for device count 1")
            self.device_id = device_id

        def get_device_multiprocessor_count(self) -> int:
            checks.note("cutlass.utils.HardwareInfo.get_device_multiprocessor_count",
                        f"{target.multi_processor_count}: the virtual {device}'s published SM count")
            return target.multi_processor_count

        def get_l2_cache_size_in_bytes(self) -> int:
            checks.note("cutlass.utils.HardwareInfo.get_l2_cache_size_in_bytes",
                        f"{target.l2_cache_size}: the virtual {device}'s published L2 size")
            return target.l2_cache_size

        def get_max_active_clusters(self, cluster_size: int, stream: Any = None) -> int:
            if cluster_size <= 0 or cluster_size > 32:
                raise ValueError(f"Cluster size must be between 1 and 32, {cluster_size} is not supported")
            estimate = target.multi_processor_count // cluster_size
            checks.note("cutlass.utils.HardwareInfo.get_max_active_clusters",
                        f"{estimate}: estimated, no driver to ask: the virtual {device}'s "
                        f"{target.multi_processor_count} SMs ÷ cluster size {cluster_size}, an upper bound "
                        "(a driver counts the clusters each GPC holds and may answer fewer)")
            return estimate

    return HardwareInfo
