"""Guards of compiler/targets/virtual_gpu.py: every private name it patches still exists with the
shape it expects, the version pin holds, and the shim still makes Inductor emit sm_90 PTX. When a
torch or triton upgrade breaks one of these, fix the shim (and only then move the pin)."""
from __future__ import annotations

import inspect
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def test_version_pin_holds_and_fails_loudly(monkeypatch):
    import torch

    from compiler.targets import virtual_gpu
    found = virtual_gpu.check_versions()
    assert found["torch"].startswith("2.13.") and found["triton"].startswith("3.9.")
    monkeypatch.setattr(torch, "__version__", "2.14.0")
    with pytest.raises(virtual_gpu.ShimVersionError, match="pinned to torch 2.13"):
        virtual_gpu.check_versions()


def test_patched_torch_names_exist():
    import torch
    import torch._inductor.config as inductor_config
    import torch._subclasses.fake_tensor as fake_tensor
    import torch._subclasses.functional_tensor as functional_tensor
    from torch._dynamo import device_interface
    from torch._inductor.codegen import wrapper
    from torch._inductor.runtime import triton_helpers, triton_heuristics

    for name in ("get_device_capability", "get_device_properties", "current_device", "device_count",
                 "get_device_name", "synchronize", "_lazy_init"):
        assert callable(getattr(torch.cuda, name)), name
    cuda = device_interface.get_interface_for_device("cuda")
    for name in ("get_device_properties", "current_device", "set_device"):
        assert hasattr(cuda.Worker, name) and hasattr(cuda, name), name
    for name in ("get_compute_capability", "is_available", "device_count", "synchronize"):
        assert hasattr(cuda, name), name
    # a constant's move to the device: FakeTensor skips it where no device is available, and every op
    # goes through FakeTensorMode.dispatch (virtual_gpu._keep_values_of_constants_moved_to_the_device)
    assert "return self.dispatch(func, types, args, kwargs)" in inspect.getsource(
        fake_tensor.FakeTensorMode.__torch_dispatch__)
    assert "avoiding_device_init = True" in inspect.getsource(fake_tensor.FakeTensorMode._dispatch_impl)
    assert list(inspect.signature(fake_tensor.run_fallback_kernel).parameters) == [
        "fake_mode", "func", "flat_args", "args_spec", "orig_not_implemented_exception"]
    # AOTAutograd's .cuda() on functional tensors passes torch.cuda.current_device() (an index)
    assert list(inspect.signature(functional_tensor.FunctionalTensor.cuda).parameters)[:2] == ["self", "device"]
    assert "torch.cuda.current_device()" in inspect.getsource(functional_tensor.FunctionalTensor.cuda)
    # Inductor's CUDA wrapper imports the raw-stream getter a CPU build lacks
    assert "_cuda_getCurrentRawStream" in inspect.getsource(wrapper)
    assert not hasattr(torch._C, "_cuda_getCurrentRawStream") or torch.cuda.is_available()
    # the compile-only plugin: asked first in precompile, its answer other than DEFER skips launchers
    assert hasattr(triton_heuristics, "CachingAutotunerPlugin") and hasattr(triton_heuristics, "DEFER")
    assert callable(triton_heuristics.get_caching_autotuner_plugins)
    precompile = inspect.getsource(triton_heuristics.CachingAutotuner.precompile)
    assert "plugin.pre_compile(self) is not DEFER" in precompile and "_precompile_worker" in precompile
    assert "get_caching_autotuner_plugins(self)" in inspect.getsource(triton_heuristics.CachingAutotuner.__init__)
    # KernelConfigOrder: _precompile_worker compiles `configs` into `compile_results` (skipping a
    # config Triton refuses, NoTritonConfigsError when none compiles); the graph's defined kernels
    worker = inspect.getsource(triton_heuristics.CachingAutotuner._precompile_worker)
    assert "for c in self.configs:" in worker and "self.compile_results = compile_results" in worker
    assert "raise NoTritonConfigsError(" in worker and "self.configs = None" in worker
    from torch._inductor.codegen import wrapper as wrapper_codegen
    assert "self.src_to_kernel: dict[str, str] = {}" in inspect.getsource(wrapper_codegen.PythonWrapperCodegen.__init__)
    import torch.fx.experimental.proxy_tensor as proxy_tensor
    assert isinstance(proxy_tensor.CONSTANT_NUMEL_LIMIT, int)
    assert "CONSTANT_NUMEL_LIMIT" in inspect.getsource(proxy_tensor.proxy_call)
    for key in ("use_static_cuda_launcher", "compile_threads", "joint_graph_constant_folding", "shape_padding",
                "force_shape_pad"):
        assert hasattr(inductor_config, key), key
    # pad_mm times padded and unpadded matmuls on the device unless shape_padding is off or padding is forced
    from torch._inductor.fx_passes import pad_mm
    assert "config.shape_padding" in inspect.getsource(pad_mm.can_pad)
    should_pad = inspect.getsource(pad_mm._should_pad)
    assert "do_bench = get_do_bench()" in should_pad and "force_shape_pad" in should_pad
    # Inductor's kernel modules check at import that the active driver is the NVIDIA one
    assert "isinstance(driver.active, backend.driver)" in inspect.getsource(triton_helpers.set_driver_to_gpu)


def test_the_cpu_build_has_the_cuda_hooks_object_virtual_cuda_cpp_retypes():
    """virtual_cuda.cpp re-types ATen's CUDA hooks object in place: it must be the CPU build's plain
    CUDAHooksInterface, created by at::detail::getCUDAHooks(), with no data members (the .cpp
    static_asserts the size when it is built)."""
    import ctypes

    import torch
    lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
    assert hasattr(lib, "_ZN2at6detail12getCUDAHooksEv")  # at::detail::getCUDAHooks()
    assert hasattr(lib, "_ZTIN2at18CUDAHooksInterfaceE")  # typeinfo for at::CUDAHooksInterface
    assert torch._C._accelerator_getAccelerator() is None and not torch.cuda.is_available()


def test_patched_triton_names_exist():
    import triton.backends
    from triton import knobs
    from triton.backends.driver import DriverBase
    from triton.runtime import autotuner
    from triton.runtime.jit import JITFunction

    assert {"nvidia", "amd"} <= set(triton.backends.backends)
    assert issubclass(triton.backends.backends["nvidia"].driver, DriverBase)
    assert hasattr(knobs.runtime, "add_stages_inspection_hook") and hasattr(knobs.compilation, "listener")
    assert hasattr(knobs.nvidia, "dump_ptxas_log")
    for tool in ("nvdisasm", "cuobjdump", "ptxas"):
        assert os.path.exists(getattr(knobs.nvidia, tool).path), tool
    params = inspect.signature(JITFunction.run).parameters
    assert "grid" in params and "warmup" in params
    assert "config" in inspect.signature(autotuner.Autotuner._bench).parameters


@pytest.mark.slow
def test_virtual_device_runs_autograd_factory_calls_and_inductor_to_sm90_ptx(tmp_path):
    code = f'''
import os, sys, re
sys.path.insert(0, {ROOT!r})
os.environ["TRITON_CACHE_DIR"] = {str(tmp_path / "tc")!r}
os.environ["TORCHINDUCTOR_CACHE_DIR"] = {str(tmp_path / "ic")!r}
from compiler.targets import get_target, virtual_gpu
runtime = virtual_gpu.RuntimeBuild({str(tmp_path / "vc")!r})
import torch
virtual_gpu.install_virtual_cuda(get_target("cuda:sm_90"), runtime)
assert torch.cuda.get_device_capability() == (9, 0)
assert torch._C._accelerator_getAccelerator() == torch.device("cuda")
from compiler.kernels import compile_only
from compiler.kernels.capture import KernelCapture
from compiler.model import JobSettings
mode = compile_only.fake_mode()
with mode:
    x = torch.randn(8, 32, device="cuda", requires_grad=True)
    mask = torch.ones(8, 32, dtype=torch.bool, device=x.device).tril()  # a factory call on the device
    (x.masked_fill(~mask, 0.0) * torch.zeros(32).cuda()).sum().backward()  # .cuda() and autograd
    print("grad", x.grad.device, tuple(x.grad.shape))
    capture = KernelCapture({str(tmp_path / "mlir")!r}, JobSettings().pass_dump_bytes)
    with capture.installed():
        compiled = torch.compile(torch.nn.ReLU(), backend=compile_only.inductor_backend(None, None, None))
        print("out", compiled(x.detach()).device)
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
with FakeTensorMode(shape_env=ShapeEnv()), torch.device("cuda"):  # as Helion compiles: its own mode, on the device
    c = torch.tensor(0.1, dtype=torch.float16)
    print("constant", c.device, c.item())  # the value as the device holds it, not an unknown SymFloat
    print("derived", type(c + 1).__name__, (c + 1).device)  # ops on it stay fake, on the device
    c[()].add_(1)  # a write through a view: the value is forgotten, not stale
    print("written", type(c.item()).__name__)
ptx = capture.ordered()[0].asm("ptx")
print(re.search(r"\\.target (\\S+)", ptx).group(1))
'''
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    lines = done.stdout.strip().splitlines()
    assert "grad cuda:0 (8, 32)" in lines and "out cuda:0" in lines
    assert "constant cuda:0 0.0999755859375" in lines  # 0.1 rounded to float16
    assert "derived FakeTensor cuda:0" in lines and "written SymFloat" in lines
    assert lines[-1] == "sm_90a"
