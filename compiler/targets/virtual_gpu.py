"""The virtual-GPU shim: make Triton and TorchInductor compile for a GPU this host does not have.

Two layers, installed separately:

* `install_compile_only_triton(target)` — public Triton API only: a `DriverBase` subclass that
  reports the target, device 0 and stream 0, set as the active driver. Triton then compiles any
  `@triton.jit` kernel for that target (TTIR -> TTGIR -> LLIR -> PTX/cubin or AMDGCN/hsaco); nothing
  can be launched.
* `install_virtual_cuda(target)` — private PyTorch APIs, for Inductor: `torch.cuda` and Dynamo's
  CUDA device interface report the target's properties, FakeTensor runs ops without a meta kernel
  on the CPU, and three Inductor steps that need a real device are switched off (see
  FIDELITY_NOTES). Pinned to torch 2.13 / triton 3.9; `check_versions` fails loudly on anything
  else and tests/test_virtual_gpu_shim.py breaks when an upgrade moves one of the patched names.

Everything device-specific in irscope goes through here, so an upgrade touches one file.
"""
from __future__ import annotations

import types
from typing import Any

from compiler.targets import GpuTarget

TORCH_VERSION = "2.13"
TRITON_VERSION = "3.9"

# What the virtual path changes relative to a run on the real device; shown in a stage note.
FIDELITY_NOTES = (
    "Virtual device: the kernels were compiled, never run; no timing exists.",
    "Inputs and parameters are fake tensors (shape, stride, dtype only), so Inductor sees no values.",
    "joint_graph_constant_folding is off: folding would evaluate constants on a CUDA device.",
    "The pattern matcher's joint-graph warm-up (which traces replacements with real CUDA tensors) is skipped.",
    "The static CUDA launcher is off and compile_threads=1: kernels are compiled in-process so their "
    "IR stays reachable; the launcher itself is never built.",
    "Autotuning does not benchmark: every config is compiled and shown; the wrapper names the first.",
    "Device properties (SM count, shared memory, L2) are the published figures of the product named "
    "in the target; Inductor's heuristics read them.",
)


class ShimVersionError(RuntimeError):
    """The installed torch/triton is not the version this shim was written against."""


def check_versions() -> dict[str, str]:
    """Fail loudly when torch or triton is not the pinned version; return both versions."""
    import torch
    import triton
    found = {"torch": torch.__version__, "triton": triton.__version__}
    if not found["torch"].startswith(TORCH_VERSION + ".") or not found["triton"].startswith(TRITON_VERSION + "."):
        raise ShimVersionError(
            f"compiler/targets/virtual_gpu.py is pinned to torch {TORCH_VERSION} / triton {TRITON_VERSION}, "
            f"found torch {found['torch']} / triton {found['triton']}: re-check every patch in it "
            f"(tests/test_virtual_gpu_shim.py) before changing the pin")
    return found


def triton_target(target: GpuTarget) -> Any:
    """The `triton.backends.compiler.GPUTarget` for `target`."""
    from triton.backends.compiler import GPUTarget
    return GPUTarget(target.backend, target.arch, target.warp_size)


def real_cuda_target_name() -> str | None:
    """The target name of this host's real CUDA device ("cuda:sm_90"), or None without one."""
    import torch
    if not torch.cuda.is_available():
        return None
    if torch.version.hip:
        arch = torch.cuda.get_device_properties(0).gcnArchName.split(":")[0]
        return f"hip:{arch}"
    major, minor = torch.cuda.get_device_capability(0)
    return f"cuda:sm_{major * 10 + minor}"


def _vendor_driver_class(target: GpuTarget) -> type:
    import triton.backends
    return triton.backends.backends["nvidia" if target.is_cuda else "amd"].driver


def _compile_only_driver_class(target: GpuTarget) -> type:
    # A subclass of the vendor's driver, so code that asks "is the active driver the NVIDIA one?"
    # (Inductor's set_driver_to_gpu) says yes; its __init__, which loads libcuda, is never run.
    vendor = _vendor_driver_class(target)

    class CompileOnlyDriver(vendor):  # type: ignore[misc, valid-type]
        """A Triton driver with a target and no device: compilation works, launching does not."""

        def __init__(self, target: Any):  # noqa: super().__init__ would load the CUDA/HIP runtime
            self.target = target

        @classmethod
        def is_active(cls) -> bool:
            return True

        def map_python_to_cpp_type(self, ty: str) -> str:
            raise RuntimeError("compile-only driver: no launcher can be built")

        def get_current_target(self) -> Any:
            return self.target

        def get_active_torch_device(self) -> Any:
            import torch
            return torch.device("cuda", 0)

        def get_benchmarker(self) -> Any:
            raise RuntimeError("compile-only driver: a virtual target cannot be benchmarked")

        def get_current_device(self) -> int:
            return 0

        def set_current_device(self, device: int) -> None:
            pass

        def get_current_stream(self, device: int | None = None) -> int:
            return 0

        def get_device_capability(self, device: int | None = None) -> tuple[int, int]:
            arch = self.target.arch
            return divmod(arch, 10) if isinstance(arch, int) else (9, 4)

    return CompileOnlyDriver


def install_compile_only_triton(target: GpuTarget) -> Any:
    """Make Triton compile for `target` with no device present; return the driver installed."""
    check_versions()
    from triton.runtime.driver import driver
    active = _compile_only_driver_class(target)(triton_target(target))
    driver.set_active(active)
    return active


GUARD_NOTE = ("PyTorch's C++ side keeps no CUDA device guard in a CPU build; without one, autograd "
              "metadata on a fake CUDA tensor aborts the process, so the virtual path is inference-only.")


def install_virtual_cuda(target: GpuTarget) -> None:
    """Make PyTorch (torch.cuda, Dynamo's device interface, FakeTensor, Inductor) believe a CUDA
    device of `target`'s kind exists, for tracing and code generation only. Irreversible: call it
    once, in a process that runs one job (the sandboxed worker)."""
    if not target.is_cuda:
        raise ValueError(f"{target.name}: Inductor on a virtual GPU is available for CUDA targets only")
    check_versions()
    import torch
    import torch._inductor.config as inductor_config
    import torch._inductor.fx_passes.joint_graph as joint_graph
    import torch._subclasses.fake_tensor as fake_tensor
    import torch.utils._pytree as pytree
    from torch._dynamo import device_interface

    major, minor = target.capability
    props = types.SimpleNamespace(
        name=target.product, major=major, minor=minor, multi_processor_count=target.multi_processor_count,
        regs_per_multiprocessor=target.regs_per_multiprocessor,
        max_threads_per_multi_processor=target.max_threads_per_multi_processor, max_threads_per_block=1024,
        warp_size=target.warp_size, total_memory=target.total_memory,
        shared_memory_per_block_optin=target.shared_memory_per_block_optin, shared_memory_per_block=49152,
        shared_memory_per_multiprocessor=target.shared_memory_per_block_optin + 1024,
        L2_cache_size=target.l2_cache_size, is_integrated=False, uuid="virtual", gcnArchName="")

    # 1. torch.cuda and Dynamo's device interface: one device of the target's kind. CUDA 12.9 is the
    #    toolkit of Triton's bundled ptxas, which is what compiles the PTX.
    torch.version.cuda = "12.9"
    torch.cuda.get_device_capability = lambda device=None: (major, minor)
    torch.cuda.get_device_properties = lambda device=None: props
    torch.cuda.current_device = lambda: 0
    torch.cuda.device_count = lambda: 1
    torch.cuda.get_device_name = lambda device=None: props.name
    torch.cuda.synchronize = lambda device=None: None
    cuda = device_interface.get_interface_for_device("cuda")
    for holder in (cuda, cuda.Worker):
        holder.get_device_properties = staticmethod(lambda device=None: props)
        holder.current_device = staticmethod(lambda: 0)
        holder.set_device = staticmethod(lambda device: None)
    cuda.get_compute_capability = staticmethod(lambda device=None: major * 10 + minor)
    cuda.is_available = staticmethod(lambda: True)
    cuda.device_count = staticmethod(lambda: 1)
    cuda.synchronize = staticmethod(lambda device=None: None)

    # 2. Triton: the compile-only driver, reporting the target; the NVIDIA backend says it is
    #    active, which is what the import-time check of Inductor's kernel modules asks.
    _vendor_driver_class(target).is_active = staticmethod(lambda: True)
    install_compile_only_triton(target)

    # 3. FakeTensor: an op without a meta kernel falls back to a real kernel on the tensor's device;
    #    run that fallback on zeros on the CPU and hand back fake tensors on the virtual device.
    original_fallback = fake_tensor.run_fallback_kernel

    def fallback_on_cpu(fake_mode: Any, func: Any, flat_args: Any, args_spec: Any, exc: Any) -> Any:
        if not any(isinstance(a, fake_tensor.FakeTensor) and a.fake_device.type == "cuda" for a in flat_args):
            return original_fallback(fake_mode, func, flat_args, args_spec, exc)
        with fake_tensor.no_dispatch():
            real = [torch.zeros(a.shape, dtype=a.dtype) if isinstance(a, fake_tensor.FakeTensor) else a
                    for a in flat_args]
            args, kwargs = pytree.tree_unflatten(real, args_spec)
            out = func(*args, **kwargs)

        def to_fake(e: Any) -> Any:
            if not isinstance(e, torch.Tensor):
                return e
            meta = torch.empty_strided(e.shape, e.stride(), dtype=e.dtype, device="meta")
            return fake_tensor.FakeTensor(fake_mode, meta, torch.device("cuda", 0))
        return pytree.tree_map(to_fake, out)

    fake_tensor.run_fallback_kernel = fallback_on_cpu

    # 4. Inductor: skip what needs a real device (see FIDELITY_NOTES).
    joint_graph.lazy_init = lambda *args, **kwargs: None
    inductor_config.use_static_cuda_launcher = False
    inductor_config.compile_threads = 1
    inductor_config.joint_graph_constant_folding = False


def capture_inductor_wrapper() -> tuple[dict[str, str], Any]:
    """Stop Inductor right after code generation and keep the wrapper's source: loading the
    generated module would need a CUDA runtime. Returns (captured, restore): `captured["code"]` is
    the wrapper once `compile_fx` has raised `StopAfterCodegen`; call `restore()` afterwards."""
    from torch._inductor.graph import GraphLowering
    captured: dict[str, str] = {}
    original = GraphLowering._compile_to_module_lines

    def capture(self: Any, wrapper_code: Any) -> Any:
        captured["code"] = wrapper_code.value if hasattr(wrapper_code, "value") else str(wrapper_code)
        raise StopAfterCodegen()

    GraphLowering._compile_to_module_lines = capture

    def restore() -> None:
        GraphLowering._compile_to_module_lines = original
    return captured, restore


class StopAfterCodegen(Exception):
    """Raised from inside Inductor once the wrapper source is captured."""


def fake_cuda_like(tensor: Any) -> Any:
    """An empty tensor on the virtual device with `tensor`'s shape, strides and dtype. Call inside
    a FakeTensorMode. No requires_grad: autograd metadata would need a CUDA device guard."""
    import torch
    return torch.empty_strided(tuple(tensor.shape), tuple(tensor.stride()), dtype=tensor.dtype, device="cuda")
