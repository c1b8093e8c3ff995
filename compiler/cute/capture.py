"""What CuTe DSL compiled while the user's program ran, taken from CuTe's own dumps.

CuTe DSL (`nvidia-cutlass-dsl`) writes, for every `@cute.jit` function it compiles, the artifacts
`CUTE_DSL_KEEP` names into `CUTE_DSL_DUMP_DIR`: the IR as traced (`ir-debug`, before any pass),
the IR after canonicalize+cse (`ir`), the PTX and the cubin. `environment` sets those variables;
`read_dump` reads the folder back, one `CompiledFunction` per compile. ptxas -v's report of each
kernel is CuTe's own remark (`CUTE_DSL_COMPILER_OPT=remarks{ptx}`: it asks ptxas for -v, which
changes neither the PTX nor the cubin), printed on stderr.

On a virtual target (`VirtualLaunches`) nothing runs: a tensor made on the virtual CUDA device is a
FakeTensor, which has no memory to export, so `from_dlpack` of one is given what a CUDA tensor's
`__dlpack__` would give (`FakeDLPack`: PyTorch's DLPack dtype, the shape, strides and CUDA device,
an address no one reads) and CuTe's own `from_dlpack` makes the tensor, with its own layout marks
(`mark_layout_dynamic`, `mark_compact_shape_dynamic`), element types and memory space. Calling a
compiled function, or a `@cute.jit` function directly, compiles it with CuTe's `compile_only` and
records the call instead of launching it (such a call then returns the compiled function, not None).
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import glob
import importlib.abc
import importlib.machinery
import os
import sys
from typing import Any, Callable, Iterator

from compiler.errors import UserFacing
from compiler.targets import GpuTarget

DUMP_DIR = "cute-dump"
KEEP = "ir,ir-debug,ptx,cubin"


def cute_arch(target: GpuTarget) -> str:
    """CuTe's name of the target: the arch-specific `a` variant from sm_90 on (wgmma, TMA and
    tcgen05 exist only there), as CUTLASS's own examples compile for."""
    arch = int(target.arch)
    return f"sm_{arch}a" if arch >= 90 else f"sm_{arch}"


# The prefixes of CuTe DSL's variables: its own, and its experimental DSL's (`cutlass.cute.experimental`,
# which CUTLASS's cute_ext examples use), which reads the same settings under its own name
PREFIXES = ("CUTE_DSL", "CUTE_EXPERIMENTAL_DSL")


def environment(workdir: str, lineinfo: bool) -> dict[str, str]:
    """CuTe DSL's variables for a job: artifacts kept in the job's folder, nothing cached outside it
    (CUTE_DSL_ARCH, `cute_arch`, is set once the job's target is known: `arch_environment`)."""
    settings = {"KEEP": KEEP, "DUMP_DIR": os.path.join(workdir, DUMP_DIR),
                "CACHE_DIR": os.path.join(workdir, "cute-cache"), "DISABLE_FILE_CACHING": "1",
                "LINEINFO": "1" if lineinfo else "0", "COMPILER_OPT": "remarks{ptx}"}
    return {f"{prefix}_{name}": value for prefix in PREFIXES for name, value in settings.items()}


def arch_environment(target: GpuTarget) -> dict[str, str]:
    """The arch CuTe compiles for (`cute_arch`), under each prefix."""
    return {f"{prefix}_ARCH": cute_arch(target) for prefix in PREFIXES}


@dataclasses.dataclass
class CompiledFunction:
    """One compile of a `@cute.jit` function: its host function's name and the dumped artifacts."""

    name: str  # the host function CuTe named for the argument types (`cutlass_add_Tensorgmem...`)
    ir: str | None  # as traced, before any pass, with the user's locations
    ir_clean: str | None  # after canonicalize+cse
    ptx: str | None
    cubin: bytes | None
    order: float  # when its PTX was written


def read_dump(directory: str) -> list[CompiledFunction]:
    """Every function CuTe compiled into `directory`, in the order it compiled them: those with a
    kernel (their PTX), and a `@cute.jit` function without one, whose host IR is all CuTe made."""
    def read(path: str, binary: bool = False) -> Any:
        if not os.path.exists(path):
            return None
        with open(path, "rb" if binary else "r", **({} if binary else {"encoding": "utf-8", "errors": "replace"})) as f:
            return f.read()

    ptx_paths = {os.path.basename(p).rsplit(".", 2)[0]: p for p in glob.glob(os.path.join(directory, "*.ptx"))}
    ir_names = {os.path.basename(p)[len("cute_dsl_"):-len(".mlir")]
                for p in glob.glob(os.path.join(directory, "cute_dsl_*.mlir"))}
    # <name>.<arch>.ptx; cute_dsl_<name>.mlir as traced and cute_dsl_<name>_clean.mlir after the passes
    host_only = {n for n in ir_names if not (n.endswith("_clean") and n[:-len("_clean")] in ir_names)}
    found = []
    for name in sorted(set(ptx_paths) | host_only):
        ptx_path, ir_path = ptx_paths.get(name), os.path.join(directory, f"cute_dsl_{name}.mlir")
        found.append(CompiledFunction(
            name=name, ir=read(ir_path), ir_clean=read(os.path.join(directory, f"cute_dsl_{name}_clean.mlir")),
            ptx=read(ptx_path) if ptx_path else None,
            cubin=read(ptx_path[:-len(".ptx")] + ".cubin", binary=True) if ptx_path else None,
            order=os.path.getmtime(ptx_path or ir_path)))
    return sorted(found, key=lambda c: (c.order, c.name))


@dataclasses.dataclass
class Launch:
    """A call of a compiled CuTe function by the user's program."""

    function: str  # the host function's name
    line: int | None  # the user's line that called it
    how: str  # "compiled function called" or "@cute.jit function called directly"
    launched: bool  # False on a virtual target: compiled, recorded, not run


def _calling_line(path: str) -> int | None:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == path:
            return frame.f_lineno
        frame = frame.f_back
    return None


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    """DLPack's (unversioned) exchange struct, as dlpack.h lays it out."""
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_DL_CUDA = 2  # kDLCUDA
# where a fake tensor's memory would start: a CUDA allocation's alignment or more (nothing reads it:
# on a virtual target no compiled function runs, and CuTe reads the pointer only to launch)
_FAKE_ADDRESS = 1 << 32
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype, _capsule_new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


class NoDLPack(UserFacing, TypeError):
    """A tensor of a dtype PyTorch cannot export through DLPack, passed to CuTe."""


class FakeDLPack:
    """What a CUDA tensor's `__dlpack__` gives CuTe, for a FakeTensor of the virtual CUDA device:
    the same dtype (PyTorch's own DLPack code for it), shape, strides and device, and an address
    that no one reads. CuTe's own `from_dlpack` takes it, so its layout marks, element types and
    memory space are CuTe's, as for a real tensor."""

    def __init__(self, tensor: Any):
        import torch
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        try:
            with unset_fake_temporarily():  # a real 1-element tensor of the dtype, as PyTorch exports it
                exported = torch.empty(1, dtype=tensor.dtype).__dlpack__()
        except (BufferError, RuntimeError, TypeError) as e:
            raise NoDLPack(f"a {tensor.dtype} tensor cannot be passed to CuTe: {e}") from None
        dtype = _DLManagedTensor.from_address(_capsule_pointer(exported, b"dltensor")).dl_tensor.dtype
        n = tensor.dim()
        self._shape = (ctypes.c_int64 * n)(*[int(d) for d in tensor.shape])
        self._strides = (ctypes.c_int64 * n)(*[int(d) for d in tensor.stride()])
        device = tensor.device.index or 0
        self._managed = _DLManagedTensor(_DLTensor(
            _FAKE_ADDRESS + int(tensor.storage_offset()) * tensor.element_size(), _DLDevice(_DL_CUDA, device), n,
            _DLDataType(dtype.code, dtype.bits, dtype.lanes), self._shape, self._strides, 0), None, None)
        self._device = (_DL_CUDA, device)

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        # the capsule points into this object, which the CuTe tensor made from it keeps alive
        return _capsule_new(ctypes.addressof(self._managed), b"dltensor", None)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._device


def _adapted(arg: Any, from_dlpack: Callable[..., Any]) -> Any:
    """A torch FakeTensor given to a CuTe function as it is (`cute.compile(fn, torch_tensor)`) as
    CuTe's own TensorAdapter takes a torch tensor, `from_dlpack(t).mark_layout_dynamic()`, through
    the job's `from_dlpack` (the adapter asks the tensor's data pointer, which a fake one has not);
    any other argument as it is."""
    from torch._subclasses.fake_tensor import FakeTensor
    return from_dlpack(arg).mark_layout_dynamic() if isinstance(arg, FakeTensor) else arg


_TVM_FFI = "cutlass.cutlass_dsl.tvm_ffi_provider"  # CuTe's TVM FFI compiled functions (`--enable-tvm-ffi`)


def _tvm_ffi_function_types(provider: Any) -> list[type]:
    """The classes of the TVM FFI compiled functions in CuTe's provider module, whose `__call__`
    comes before CuTe's own in their order of bases."""
    return [kind for kind in (getattr(provider, "TVMFFIJitCompiledFunction", None),
                              getattr(provider, "TVMFFIJitCompiledFunctionWithKwargs", None))
            if isinstance(kind, type) and "__call__" in kind.__dict__]


class _WhenImported(importlib.abc.MetaPathFinder):
    """Runs `then(module)` once the module `name` is imported: CuTe imports its TVM FFI provider
    (seconds) only for a compile that asks for TVM FFI, so the job does not import it first."""

    def __init__(self, name: str, then: Callable[[Any], None]):
        self.name, self.then = name, then

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            loader, then = spec.loader, self.then
            real_exec = loader.exec_module

            def exec_module(module: Any) -> None:
                real_exec(module)
                then(module)
            loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


class VirtualLaunches:
    """Records every call of a compiled CuTe function; on a virtual target also gives CuTe's
    `from_dlpack` what a FakeTensor would export and compiles instead of running (module docstring)."""

    def __init__(self, path: str, virtual: bool):
        self.path = path
        self.virtual = virtual
        self.launches: list[Launch] = []
        self.python_names: dict[str, str] = {}  # host function name -> the @cute.jit function's name

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Hooks outside the compile itself: CuTe attributes host ops to the innermost frame that is
        not its own, so no hook of irscope's may be on the stack while it builds the IR. Its setup
        step (`_prepare_compilation`, done before the IR is built) sees a direct call; a compiled
        function's `__call__` happens after the compile."""
        import cutlass.cute.runtime as runtime
        from cutlass.base_dsl.dsl import BaseDSL
        from cutlass.base_dsl.jit_executor import JitCompiledFunction

        saved = {(BaseDSL, "_prepare_compilation"): BaseDSL._prepare_compilation,
                 (runtime, "from_dlpack"): runtime.from_dlpack}
        if "cutlass.torch" in sys.modules:
            saved[(sys.modules["cutlass.torch"], "from_dlpack")] = sys.modules["cutlass.torch"].from_dlpack
        recorder, real_prepare, real_from_dlpack = self, BaseDSL._prepare_compilation, runtime.from_dlpack

        def calls(real_call: Callable[..., Any]) -> Callable[..., Any]:
            def call(compiled: Any, *args: Any, **kwargs: Any) -> Any:
                recorder.launches.append(Launch(compiled.function_name, _calling_line(recorder.path),
                                                "compiled function called", not recorder.virtual))
                return 0 if recorder.virtual else real_call(compiled, *args, **kwargs)
            return call

        def prepare(dsl: Any, body: Any, *args: Any, **kwargs: Any) -> Any:
            direct = not kwargs.get("compile_only", False)
            if recorder.virtual:  # a torch tensor passed as it is: CuTe's TensorAdapter, on a fake one
                args = tuple(_adapted(arg, from_dlpack) for arg in args)
                kwargs = {name: _adapted(arg, from_dlpack) for name, arg in kwargs.items()}
            setup = real_prepare(dsl, body, *args, **kwargs)
            recorder.python_names[setup.function_name] = body.__name__
            if direct:
                recorder.launches.append(Launch(setup.function_name, _calling_line(recorder.path),
                                                "@cute.jit function called directly", not recorder.virtual))
                if recorder.virtual:
                    setup = dataclasses.replace(setup, compile_only=True) if dataclasses.is_dataclass(setup) \
                        else setup._replace(compile_only=True)
            return setup

        def from_dlpack(tensor: Any, assumed_align: int | None = None, use_32bit_stride: bool = False,
                        **kwargs: Any) -> Any:
            from torch._subclasses.fake_tensor import FakeTensor
            if not isinstance(tensor, FakeTensor) or tensor.device.type != "cuda":
                # a host FakeTensor (the program's own FakeTensorMode) PyTorch exports itself, as on a GPU
                return real_from_dlpack(tensor, assumed_align, use_32bit_stride, **kwargs)
            exported = FakeDLPack(tensor)
            adapted = real_from_dlpack(exported, assumed_align, use_32bit_stride, **kwargs)
            adapted._irscope_exported = exported  # the struct CuTe reads when it first needs the layout
            return adapted

        def hook_calls(kinds: list[type]) -> None:
            for kind in kinds:
                saved[(kind, "__call__")] = kind.__dict__["__call__"]
                kind.__call__ = calls(kind.__dict__["__call__"])

        hook_calls([JitCompiledFunction])
        finder = _WhenImported(_TVM_FFI, lambda provider: hook_calls(_tvm_ffi_function_types(provider)))
        if _TVM_FFI in sys.modules:
            hook_calls(_tvm_ffi_function_types(sys.modules[_TVM_FFI]))
        else:
            sys.meta_path.insert(0, finder)
        BaseDSL._prepare_compilation = prepare
        if self.virtual:
            for owner, name in list(saved):
                if name == "from_dlpack":
                    setattr(owner, name, from_dlpack)
        try:
            yield
        finally:
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
            for (owner, name), value in saved.items():
                setattr(owner, name, value)
