"""The virtual-GPU shim: make Triton and TorchInductor compile for a GPU this host does not have.

Two layers, installed separately:

* `install_compile_only_triton(target)` — public Triton API only: a `DriverBase` subclass that
  reports the target, device 0 and stream 0, set as the active driver. Triton then compiles any
  `@triton.jit` kernel for that target (TTIR -> TTGIR -> LLIR -> PTX/cubin or AMDGCN/hsaco); nothing
  can be launched.
* `install_virtual_cuda(target, runtime)` — for PyTorch and Inductor: a CUDA device that exists for
  fake tensors. Its C++ half (virtual_cuda.cpp, built by `RuntimeBuild` with g++ against the
  installed torch) gives the CPU build CUDA hooks and a device guard, so factory calls on the
  device, `.cuda()`, BatchNorm and the autograd engine (training) work; private Python APIs make
  `torch.cuda` and Dynamo's CUDA device interface report the target's properties, FakeTensor run
  ops without a meta kernel on the CPU, Inductor's generated modules compile every Triton config
  without building launchers, and the steps that need a real device are switched off (see
  FIDELITY_NOTES). Pinned to torch 2.13 / triton 3.9; `check_versions` fails loudly on anything
  else and tests/test_virtual_gpu_shim.py breaks when an upgrade moves one of the patched names.

Everything device-specific in irscope goes through here, so an upgrade touches one file.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import time
import types
from typing import Any, Iterator

from compiler.errors import UserFacing
from compiler.targets import GpuTarget

TORCH_VERSION = "2.13"
TRITON_VERSION = "3.9"

# What the virtual path changes relative to a run on the real device; shown in a stage note.
FIDELITY_NOTES = (
    "Virtual device: the kernels were compiled, never run; no timing exists.",
    "Inputs and parameters are fake tensors (shape, stride, dtype, device only), so Inductor sees no values.",
    "PyTorch's C++ side sees the CUDA device through irscope's stand-ins (CUDA hooks and a device guard "
    "with one device and one stream, compiled against this PyTorch): factory calls on the device, .cuda(), "
    "BatchNorm and autograd behave as on a GPU; no CUDA library is loaded.",
    "Ops without a meta kernel run their CPU kernel on zeros to learn output shapes; choices a CUDA kernel "
    "would make itself (scaled_dot_product_attention's backend among them) are the CPU build's.",
    "joint_graph_constant_folding is off: folding would evaluate constants on the CUDA device; for the same "
    "reason make_fx tracks no values of small constant tensors (code that reads one while tracing, .item() of a "
    "constant, fails), where on a GPU it computes them there. FakeTensor's own small constants moved to the "
    "device (torch.tensor(0.1, device=\"cuda\")) keep their value for .item() only, converted on the CPU.",
    "The static CUDA launcher is off and compile_threads=1: kernels are compiled in-process so their "
    "IR stays reachable; launchers are never built, so Inductor's occupancy-driven RBLOCK halving (it reads "
    "register counts from the loaded kernel) does not run.",
    "Autotuning does not benchmark: every config is compiled and shown; the wrapper names the first. "
    "Each kernel's first config is compiled as Inductor's module loads, its other configs once every graph "
    "compiled (Inductor compiles them all at load): the same compilations, the first kernels' stages earlier.",
    "shape_padding is off (unless force_shape_pad is set): Inductor decides whether to pad a matmul with "
    "unaligned sizes by timing padded and unpadded matmuls on the GPU; here every such matmul stays unpadded.",
    "Device properties (SM count, shared memory, L2) are the published figures of the product named "
    "in the target; Inductor's heuristics read them.",
)


class VirtualTargetError(UserFacing, RuntimeError):
    """The program asked a virtual GPU for what only a real one does (launch, benchmark)."""


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


def shim_fits() -> bool:
    """Whether the installed torch and Triton are the ones the virtual CUDA device is pinned to
    (check_versions); another toolchain's kernel languages use the compile-only driver alone."""
    try:
        check_versions()
    except ShimVersionError:
        return False
    return True


# The Triton releases whose compile-only driver (public API only: `DriverBase`, `driver.set_active`,
# `GPUTarget`) is tested here (tests/test_toolchains.py compiles a Triton and a Gluon kernel for sm_90
# on each, every stage of the default's made): the `triton`, `gluon` and `helion` languages' virtual
# targets on a toolchain of another Triton. Triton 3.7 needs compiler/kernels/jit_location.py.
COMPILE_ONLY_TRITON = ("3.7", "3.8", "3.9")


def check_compile_only_triton() -> str:
    """Fail loudly when the installed Triton is not one the compile-only driver is tested on;
    return its version."""
    import triton
    if not any(triton.__version__.startswith(v + ".") for v in COMPILE_ONLY_TRITON):
        raise ShimVersionError(f"the compile-only Triton driver (compiler/targets/virtual_gpu.py) is tested on Triton "
                               f"{', '.join(COMPILE_ONLY_TRITON)}, found {triton.__version__}")
    return triton.__version__


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

        def __init__(self, target: Any):  # super().__init__ is not called: it would load the CUDA/HIP runtime
            self.target = target

        @classmethod
        def is_active(cls) -> bool:
            return True

        def map_python_to_cpp_type(self, ty: str) -> str:
            raise VirtualTargetError("compile-only driver: no launcher can be built")

        def get_current_target(self) -> Any:
            return self.target

        def get_active_torch_device(self) -> Any:
            import torch
            return torch.device("cuda", 0)

        def get_benchmarker(self) -> Any:
            raise VirtualTargetError("compile-only driver: a virtual target cannot be benchmarked")

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
    check_compile_only_triton()
    from triton.runtime.driver import driver
    active = _compile_only_driver_class(target)(triton_target(target))
    driver.set_active(active)
    return active


class VirtualDeviceUtils:
    """`driver.active.utils` of a virtual CUDA target, for programs that ask Triton's driver about the
    device or load a compiled kernel themselves (Triton's fused-softmax tutorial sizes its grid from
    `utils.get_device_properties` and the kernel's `n_regs` after `_init_handles()`): the target's
    published figures, and each kernel's registers and local memory read from its cubin by
    cuobjdump, as the CUDA driver would report them after loading it."""

    def __init__(self, target: GpuTarget):
        self.target = target

    def get_device_properties(self, device: int = 0) -> dict[str, int]:
        from compiler.targets.occupancy import SM_LIMITS
        limits = SM_LIMITS[self.target.arch]  # type: ignore[index]
        return {"max_shared_mem": self.target.shared_memory_per_block_optin,
                "max_num_regs": limits.registers, "multiprocessor_count": self.target.multi_processor_count,
                "warpSize": self.target.warp_size}

    def load_binary(self, name: str, kernel: bytes, shared: int, device: int) -> tuple[None, None, int, int, int]:
        """(module, function, registers per thread, spills, most threads per block): no module or
        function (nothing is loaded), the rest from the cubin. Spills as Triton reads them from the
        driver: local memory bytes / 4."""
        import tempfile

        from compiler.kernels.nvidia_tools import cubin_resource_usage_by_function
        from compiler.targets.occupancy import SM_LIMITS
        with tempfile.TemporaryDirectory() as scratch:
            usage = cubin_resource_usage_by_function(kernel, scratch)
        found = usage.get(name) or next(iter(usage.values()), {})
        registers, local = found.get("REG", 0), found.get("LOCAL", 0)
        limits = SM_LIMITS[self.target.arch]  # type: ignore[index]
        threads = limits.max_threads_per_block
        if registers:  # the CUDA driver's limit: whole warps of the kernel's registers in the register file
            per_warp = -(-registers * self.target.warp_size // limits.register_unit) * limits.register_unit
            warps = (limits.registers // limits.sub_partitions // per_warp) * limits.sub_partitions
            threads = min(threads, warps * self.target.warp_size)
        return None, None, registers, local // 4, threads


class VirtualLauncher:
    """The launcher a virtual target builds for a compiled kernel: the kernel loads (its figures,
    above), and launching it is refused; compiler/kernels/launches.py records a launch of a
    compiled kernel on a virtual target instead of calling this."""

    def __init__(self, src: Any, metadata: Any):
        self.src, self.metadata = src, metadata

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise VirtualTargetError("a virtual GPU launches nothing: the kernel was compiled, not run")


class VirtualStream:
    """`torch.cuda.Stream` on the virtual device: its one stream, 0 (what the compile-only driver
    reports); nothing is ever queued on it, so waiting on it is immediate."""

    cuda_stream = 0
    stream_id = 0

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any):
        import torch
        self.device = torch.device("cuda", 0)
        self.priority = priority

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def wait_stream(self, stream: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def record_event(self, event: Any = None) -> Any:
        return event

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VirtualStream)

    def __hash__(self) -> int:
        return 0


def install_program_device(target: GpuTarget, program: str) -> None:
    """What a Triton program run as pasted asks the virtual CUDA `target` for beyond what Inductor
    does (compiler/kernels/program.py, after `install_virtual_cuda`): loading a compiled kernel
    through the active compile-only driver (`CompiledKernel._init_handles`: registers, spills,
    threads; the driver's `utils.get_device_properties`), and `install_program_cuda` for the program
    in the file `program`. Inductor's
    path builds no launcher and never loads one."""
    from triton.runtime.driver import driver
    if not target.is_cuda or target.arch not in _sm_limits():
        return
    active = driver.active
    active.utils = VirtualDeviceUtils(target)
    active.launcher_cls = VirtualLauncher
    install_program_cuda(target, program)


def install_program_cuda(target: GpuTarget, program: str) -> None:
    """`torch.cuda` as the program in the file `program`, run as pasted, uses it on the virtual
    CUDA `target` (Triton's, Helion's, CuTe DSL's examples): the target's properties, its one
    stream, and available when the program asks (`if not torch.cuda.is_available(): raise`);
    PyTorch's own code keeps its CPU build's answer, which its tensor constructors rely on
    (`torch.tensor(data, device="cuda")` takes the real CUDA path otherwise). Not PyTorch's C++
    side (that is `install_virtual_cuda`)."""
    import sys

    import torch
    cpu_build_answer = torch.cuda.is_available

    def is_available() -> bool:
        return sys._getframe(1).f_code.co_filename == program or cpu_build_answer()
    _install_torch_cuda_queries(target)
    for name, value in STREAMS.items():
        setattr(torch.cuda, name, value)
    torch.cuda.set_device = lambda device: None
    torch.cuda.is_available = is_available


# torch.cuda's streams on a virtual GPU: its one stream, on which nothing runs (a program's own
# streams, FSDP2's all-gather and reduce-scatter streams)
STREAMS: dict[str, Any] = {
    "Stream": VirtualStream,
    "current_stream": lambda device=None: VirtualStream(),
    "default_stream": lambda device=None: VirtualStream(),
    "set_stream": lambda stream: None,
    "stream": lambda stream=None: contextlib.nullcontext(stream),
}


def _sm_limits() -> dict[int, Any]:
    from compiler.targets.occupancy import SM_LIMITS
    return SM_LIMITS


# --- PyTorch and Inductor on a virtual CUDA device ---------------------------------------------

RUNTIME_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "virtual_cuda.cpp")


RUNTIME_CACHE_DIR = "virtual_cuda"  # in the toolchain cache: the library the trusted warm-up built

# The toolchain warm-up of a language whose cache is this library alone (the kernel languages': a
# CUDA target's job installs the virtual device, or its CUDA hooks, to run the program on fake
# tensors). Its warm-up job runs none of it (`export_runtime`); the text says what the job was.
RUNTIME_WARM_UP = ("# irscope's toolchain warm-up: builds the virtual CUDA device's C++ half "
                   "(compiler/targets/virtual_cuda.cpp)\n# into the toolchain cache every later job of this "
                   "language loads it from; nothing here runs\n")


def export_runtime(export: str) -> None:
    """The warm-up job of a language whose toolchain cache is this library (RUNTIME_WARM_UP): build
    it into `export`, where the toolchain (shim_fits) takes the virtual device; an empty cache
    otherwise (that toolchain's jobs use the compile-only driver alone)."""
    os.makedirs(export, exist_ok=True)
    if shim_fits():
        RuntimeBuild(os.path.join(export, RUNTIME_CACHE_DIR)).wait()


class RuntimeBuild:
    """The C++ half of the virtual CUDA device (virtual_cuda.cpp: CUDA hooks and a device guard),
    compiled against the installed PyTorch by g++ in the background. It needs torch's headers,
    not torch itself, so the build starts before torch is imported and overlaps the import.
    It depends on nothing but that source and the installed torch: the trusted toolchain warm-up
    builds it once into the toolchain cache, and a job finds it there (`runtime_for_job`)."""

    def __init__(self, directory: str, from_toolchain_cache: bool = False):
        self.path = library_path(directory)
        self.from_toolchain_cache = from_toolchain_cache
        torch_dir = _torch_package_dir()
        self.started = time.perf_counter()
        self.seconds = 0.0
        self.prebuilt = os.path.exists(self.path)
        self._proc: subprocess.Popen | None = None
        if self.prebuilt:
            return
        os.makedirs(directory, exist_ok=True)
        lib = os.path.join(torch_dir, "lib")
        command = [shutil.which("g++") or "g++", "-O0", "-shared", "-fPIC", "-std=c++20", "-w",
                   "-I", os.path.join(torch_dir, "include"), RUNTIME_SOURCE, "-L", lib, "-lc10", "-ltorch_cpu",
                   f"-Wl,-rpath,{lib}", "-o", self.path]
        self._proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=directory)

    def report(self) -> dict[str, Any]:
        """Where the library came from, for a job's `target` timing: the toolchain cache, or a build
        (the job's own, or its spare's before the job arrived), and the seconds the job waited."""
        return {"virtual_device_from_toolchain_cache": self.from_toolchain_cache,
                "virtual_device_build_s": self.seconds}

    def wait(self) -> str:
        """The library's path once it is built; RuntimeError with g++'s output when it fails."""
        if self._proc is not None:
            output, _ = self._proc.communicate()
            self.seconds = round(time.perf_counter() - self.started, 3)
            if self._proc.returncode != 0:
                raise RuntimeError("building the virtual CUDA device (compiler/targets/virtual_cuda.cpp) "
                                   f"failed: {output.decode(errors='replace')[-3000:]}")
            self._proc = None
        return self.path


def library_path(directory: str) -> str:
    """Where RuntimeBuild(directory) keeps its library: named by a hash of virtual_cuda.cpp and the
    torch it is built against, so another torch or another source never finds a stale one."""
    with open(RUNTIME_SOURCE, "rb") as f:
        source = f.read()
    key = hashlib.sha256(source + _torch_package_dir().encode()).hexdigest()[:16]
    return os.path.join(directory, f"virtual_cuda-{key}.so")


def runtime_for_job(toolchain_cache: str, workdir: str) -> RuntimeBuild:
    """The toolchain cache's library when the warm-up built it (read-only there), else a build of
    the job's own in its work directory."""
    cached = os.path.join(toolchain_cache, RUNTIME_CACHE_DIR) if toolchain_cache else ""
    if cached and os.path.exists(library_path(cached)):
        return RuntimeBuild(cached, from_toolchain_cache=True)
    return RuntimeBuild(os.path.join(workdir, "virtual-cuda"))


def _torch_package_dir() -> str:
    import importlib.util
    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.submodule_search_locations, "torch is not installed"
    return list(spec.submodule_search_locations)[0]


def _install_torch_cuda_queries(target: GpuTarget) -> Any:
    """torch.cuda's questions about the device, answered for one device of `target`'s kind (its
    published properties); the properties returned."""
    import torch
    major, minor = target.capability
    props = types.SimpleNamespace(
        name=target.product, major=major, minor=minor, multi_processor_count=target.multi_processor_count,
        regs_per_multiprocessor=target.regs_per_multiprocessor,
        max_threads_per_multi_processor=target.max_threads_per_multi_processor, max_threads_per_block=1024,
        warp_size=target.warp_size, total_memory=target.total_memory,
        shared_memory_per_block_optin=target.shared_memory_per_block_optin, shared_memory_per_block=49152,
        shared_memory_per_multiprocessor=target.shared_memory_per_block_optin + 1024,
        L2_cache_size=target.l2_cache_size, is_integrated=False, uuid="virtual", gcnArchName="")

    # 2. torch.cuda and Dynamo's device interface: one device of the target's kind. CUDA 12.9 is the
    #    toolkit of Triton's bundled ptxas, which is what compiles the PTX. Lazy initialisation (asked
    #    for by factory calls and .cuda()) has nothing to initialise. Inductor's CUDA wrapper imports
    #    the raw-stream getter, which a CPU build lacks; nothing is ever launched on its stream 0.
    torch.version.cuda = "12.9"
    torch.cuda.get_device_capability = lambda device=None: (major, minor)
    torch.cuda.get_device_properties = lambda device=None: props
    torch.cuda.current_device = lambda: 0
    torch.cuda.device_count = lambda: 1
    torch.cuda.get_device_name = lambda device=None: props.name
    torch.cuda.synchronize = lambda device=None: None
    torch.cuda._lazy_init = lambda: None
    torch._C._cuda_getCurrentRawStream = lambda device: 0
    return props


def install_cuda_hooks(runtime: RuntimeBuild) -> None:
    """PyTorch's C++ side only (virtual_cuda.cpp's CUDA hooks and device guard, `runtime` built):
    `.cuda()`, factory calls on the device and autograd accept fake CUDA tensors. Irreversible, after
    `import torch`; `install_virtual_cuda` does this and the rest."""
    status = ctypes.CDLL(runtime.wait()).irscope_install_virtual_cuda()
    if status != 1:
        raise ShimVersionError("this PyTorch has CUDA hooks of its own: a virtual device is for CPU builds")


def install_virtual_cuda(target: GpuTarget, runtime: RuntimeBuild) -> None:
    """Make PyTorch (its C++ side, torch.cuda, Dynamo's device interface, FakeTensor, Inductor) and
    Triton believe a CUDA device of `target`'s kind exists, for tracing, code generation and
    compilation only: tensors on it must be fake. Irreversible: call it once, in a process that
    runs one job (the sandboxed worker), after `import torch`."""
    if not target.is_cuda:
        raise ValueError(f"{target.name}: Inductor on a virtual GPU is available for CUDA targets only")
    check_versions()
    import torch
    import torch._inductor.config as inductor_config
    import torch._inductor.runtime.triton_heuristics as triton_heuristics
    import torch._subclasses.fake_tensor as fake_tensor
    import torch._subclasses.functional_tensor as functional_tensor
    import torch.fx.experimental.proxy_tensor as proxy_tensor
    import torch.utils._pytree as pytree
    from torch._dynamo import device_interface

    # 1. PyTorch's C++ side: CUDA hooks and a device guard (virtual_cuda.cpp), so factory calls on
    #    the device, .cuda(), BatchNorm and the autograd engine accept (fake) CUDA tensors.
    install_cuda_hooks(runtime)

    major, minor = target.capability
    props = _install_torch_cuda_queries(target)
    cuda = device_interface.get_interface_for_device("cuda")
    for holder in (cuda, cuda.Worker):
        holder.get_device_properties = staticmethod(lambda device=None: props)
        holder.current_device = staticmethod(lambda: 0)
        holder.set_device = staticmethod(lambda device: None)
    cuda.get_compute_capability = staticmethod(lambda device=None: major * 10 + minor)
    cuda.is_available = staticmethod(lambda: True)
    cuda.device_count = staticmethod(lambda: 1)
    cuda.synchronize = staticmethod(lambda device=None: None)

    # 3. AOTAutograd's functional tensors implement .cuda() as .to(torch.cuda.current_device()); a
    #    bare index means "the accelerator's device", which a CPU build resolves to none.
    original_cuda = functional_tensor.FunctionalTensor.cuda

    def functional_cuda(self: Any, device: Any = None, *args: Any, **kwargs: Any) -> Any:
        if device is None or isinstance(device, int):
            device = torch.device("cuda", 0 if device is None else device)
        return original_cuda(self, device, *args, **kwargs)

    functional_tensor.FunctionalTensor.cuda = functional_cuda

    # 4. Triton: the compile-only driver, reporting the target; the NVIDIA backend says it is
    #    active, which is what the import-time check of Inductor's kernel modules asks.
    _vendor_driver_class(target).is_active = staticmethod(lambda: True)
    install_compile_only_triton(target)

    # 5. FakeTensor: an op without a meta kernel falls back to a real kernel on the tensor's device;
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
    _keep_values_of_constants_moved_to_the_device(fake_tensor)

    # 6. Inductor's kernels, as its generated module loads them: every autotune config is compiled
    #    (CachingAutotuner's plugin hook, called first in precompile), no launcher is built (that
    #    loads the binary onto the device).
    class CompileOnly(triton_heuristics.CachingAutotunerPlugin):
        def pre_compile(self, autotuner: Any) -> object:
            if _config_order is not None:
                _config_order.first(autotuner)
            else:
                autotuner._precompile_worker()
            return "compiled, no launcher"

    original_plugins = triton_heuristics.get_caching_autotuner_plugins
    triton_heuristics.get_caching_autotuner_plugins = lambda autotuner: [CompileOnly(), *original_plugins(autotuner)]

    # 7. make_fx computes the values of small constant tensors for real as it traces, to answer
    #    .item() on them later; on the virtual device that is an allocation no backend can make
    #    (a constant moved with .cuda() in forward), so it tracks none (see FIDELITY_NOTES).
    proxy_tensor.CONSTANT_NUMEL_LIMIT = 0

    # 8. Inductor: skip what needs a real device (see FIDELITY_NOTES).
    inductor_config.use_static_cuda_launcher = False
    inductor_config.compile_threads = 1
    inductor_config.joint_graph_constant_folding = False
    if not inductor_config.force_shape_pad:  # forced, pad_mm pads without timing anything
        inductor_config.shape_padding = False  # pad_mm times matmuls on the device to decide


def _keep_values_of_constants_moved_to_the_device(fake_tensor: types.ModuleType) -> None:
    """FakeTensor keeps the value of a small tensor made from Python data (`torch.tensor(1.0)`) and
    answers `.item()` of it. On a GPU it keeps that value when the tensor is made on the device too;
    on a CPU build FakeTensor avoids the device and the moved tensor has no value, so `.item()` of
    it is an unknown SymFloat. Libraries read such values while they compile: Inductor's lowering of
    a half-precision comparison with a scalar rounds the scalar with `torch.tensor(v,
    dtype=...).item()`, which under Helion's `torch.device("cuda")` compile context is made on the
    device ("not a supported constant type: SymFloat" where a GPU compiles).

    Here a constant's move to the virtual device keeps the value it has there, computed on the CPU
    (a copy converts dtypes as the device does), for `.item()` only: no other op computes with it, so
    every result stays on the device, fake. A mutating op given the tensor or a view of it forgets
    the value, as FakeTensor forgets its own constants."""
    import torch
    from torch.multiprocessing.reductions import StorageWeakRef
    from torch.utils.weak import WeakIdKeyDictionary

    aten = torch.ops.aten
    reads, moves = (aten.item.default, aten._local_scalar_dense.default), (aten._to_copy.default,)
    values: WeakIdKeyDictionary = WeakIdKeyDictionary()  # fake tensor on the device -> its value on the CPU
    original = fake_tensor.FakeTensorMode.dispatch

    def storage(t: Any) -> Any:
        return StorageWeakRef(t.untyped_storage())

    def dispatch(self: Any, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        source = args[0] if args and isinstance(args[0], fake_tensor.FakeTensor) else None
        if func in reads and source is not None and source in values:
            return values[source].item()
        if values and getattr(getattr(func, "_schema", None), "is_mutable", False):
            written = {storage(a) for a in (*args, *kwargs.values()) if isinstance(a, fake_tensor.FakeTensor)}
            for t in [t for t in values.keys() if storage(t) in written]:
                del values[t]
        out = original(self, func, types, args, kwargs)
        if (func in moves and source is not None and source.constant is not None
                and isinstance(out, fake_tensor.FakeTensor) and out.fake_device.type == "cuda"):
            with fake_tensor.no_dispatch():
                values[out] = aten._to_copy.default(source.constant, **{**kwargs, "device": torch.device("cpu")})
        return out

    fake_tensor.FakeTensorMode.dispatch = dispatch


_config_order: "KernelConfigOrder | None" = None  # set while a job compiles on the virtual device


class KernelConfigOrder:
    """When Triton compiles each autotune config of Inductor's kernels on the virtual device.

    Inductor's precompile, as its generated module loads, compiles every config of a kernel before
    the next kernel. Here the module's load compiles each kernel's first config (the one the
    wrapper names; if Triton refuses it for its resources or ptxas fails, the next one, as
    Inductor's own precompile skips such configs); once every graph compiled, `rest_units()` hands
    out the other configs, one unit per kernel that compiles them in their order (in this process,
    or in a helper forked from it: compiler/pytorch/gpu_codegen.py). Every compilation is
    Inductor's own (`_precompile_worker` on one config at a time), the same compilations as
    Inductor's in another order, so the first config of every kernel reaches the page before the
    others. A kernel compiled here ends with the compile results of all its configs in their
    order; a config compiled in a helper leaves none in this process (compile-only: none is ever
    launched). `progress` is told, before each compilation, "kernel k of n, config c of m" (n: the
    kernels Inductor defined in the graph being loaded)."""

    def __init__(self, progress: Any):
        self.progress = progress
        self.rest: list[tuple[Any, str, list[tuple[int, Any]]]] = []  # (autotuner, kernel k of n, configs left)
        self._graph: Any = None
        self._kernels_loaded = 0

    @contextlib.contextmanager
    def installed(self) -> Iterator["KernelConfigOrder"]:
        global _config_order
        _config_order = self
        try:
            yield self
        finally:
            _config_order = None

    def first(self, autotuner: Any) -> None:
        from torch._inductor.runtime.triton_heuristics import NoTritonConfigsError
        configs = list(enumerate(autotuner.configs or []))
        total, where = len(configs), self._kernel_of(autotuner)
        while configs:
            index, config = configs.pop(0)
            try:
                self._compile(autotuner, where, index, config, total, [])
                break
            except NoTritonConfigsError:
                if not configs:
                    raise  # no config compiles: Inductor's own error
        if configs:
            self.rest.append((autotuner, where, configs))

    def rest_units(self) -> list[tuple[int, Any]]:
        """The other configs still to compile, taken from the order: one unit per kernel (a callable
        compiling its configs in their order), with its number of configs, in load order."""
        units = [(len(configs), functools.partial(self._compile_rest_of, autotuner, where, configs))
                 for autotuner, where, configs in self.rest]
        self.rest = []
        return units

    def _compile_rest_of(self, autotuner: Any, where: str, configs: list[tuple[int, Any]]) -> None:
        from torch._inductor.runtime.triton_heuristics import NoTritonConfigsError
        total = configs[-1][0] + 1
        kept = list(autotuner.compile_results)
        for index, config in configs:
            try:
                self._compile(autotuner, where, index, config, total, kept)
            except NoTritonConfigsError:
                autotuner.compile_results = kept  # skipped, as Inductor skips such a config
        autotuner.configs = None  # as Inductor's precompile leaves it

    def _compile(self, autotuner: Any, where: str, index: int, config: Any, total: int, kept: list[Any]) -> None:
        self.progress(f"Triton: {where}, config {index + 1} of {total}")
        autotuner.configs = [config]
        autotuner.compile_results = []
        autotuner._precompile_worker()
        kept += autotuner.compile_results
        autotuner.compile_results = list(kept)

    def _kernel_of(self, autotuner: Any) -> str:
        from torch._inductor.virtualized import V
        graph = V.graph if V.graph is not None and hasattr(V.graph, "wrapper_code") else None
        if graph is not self._graph:
            self._graph, self._kernels_loaded = graph, 0
        self._kernels_loaded += 1
        name = autotuner.inductor_meta.get("kernel_name") or getattr(autotuner.fn, "__name__", "?")
        defined = len(getattr(getattr(graph, "wrapper_code", None), "src_to_kernel", None) or {})
        of = f" of {defined}" if defined >= self._kernels_loaded else ""
        return f"kernel {self._kernels_loaded}{of} ({name})"
