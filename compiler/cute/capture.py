"""What CuTe DSL compiled while the user's program ran, taken from CuTe's own dumps.

CuTe DSL (`nvidia-cutlass-dsl`) writes, for every `@cute.jit` function it compiles, the artifacts
`CUTE_DSL_KEEP` names into `CUTE_DSL_DUMP_DIR`: the IR as traced (`ir-debug`, before any pass),
the IR after canonicalize+cse (`ir`), the PTX and the cubin. `environment` sets those variables;
`read_dump` reads the folder back, one `CompiledFunction` per compile. ptxas -v's report of each
kernel is CuTe's own remark (`CUTE_DSL_COMPILER_OPT=remarks{ptx}`: it asks ptxas for -v, which
changes neither the PTX nor the cubin), printed on stderr.

On a virtual target (`VirtualLaunches`) nothing runs: a tensor made on the virtual CUDA device is a
FakeTensor, which has no memory to export, so `from_dlpack` of one becomes CuTe's own
`make_fake_tensor` with the same dtype, shape, strides, alignment and global memory space (what a
CUDA tensor's DLPack device gives); calling a compiled function, or a `@cute.jit` function
directly, compiles it with CuTe's `compile_only` and records the call instead of launching it (such
a call then returns the compiled function, not None).
"""
from __future__ import annotations

import contextlib
import dataclasses
import glob
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


def environment(workdir: str, lineinfo: bool) -> dict[str, str]:
    """CuTe DSL's variables for a job: artifacts kept in the job's folder, nothing cached outside it
    (CUTE_DSL_ARCH, `cute_arch`, is set once the job's target is known)."""
    return {
        "CUTE_DSL_KEEP": KEEP,
        "CUTE_DSL_DUMP_DIR": os.path.join(workdir, DUMP_DIR),
        "CUTE_DSL_CACHE_DIR": os.path.join(workdir, "cute-cache"),
        "CUTE_DSL_DISABLE_FILE_CACHING": "1",
        "CUTE_DSL_LINEINFO": "1" if lineinfo else "0",
        "CUTE_DSL_COMPILER_OPT": "remarks{ptx}",
    }


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
    """Every function CuTe compiled into `directory`, in the order it compiled them."""
    found = []
    for ptx_path in glob.glob(os.path.join(directory, "*.ptx")):
        stem = os.path.basename(ptx_path).rsplit(".", 2)[0]  # <name>.<arch>.ptx

        def read(path: str, binary: bool = False) -> Any:
            if not os.path.exists(path):
                return None
            with open(path, "rb" if binary else "r", **({} if binary else {"encoding": "utf-8",
                                                                             "errors": "replace"})) as f:
                return f.read()

        found.append(CompiledFunction(
            name=stem, ir=read(os.path.join(directory, f"cute_dsl_{stem}.mlir")),
            ir_clean=read(os.path.join(directory, f"cute_dsl_{stem}_clean.mlir")),
            ptx=read(ptx_path), cubin=read(ptx_path[:-len(".ptx")] + ".cubin", binary=True),
            order=os.path.getmtime(ptx_path)))
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


def fake_cute_tensor(dtype: Any, shape: tuple, stride: tuple, assumed_align: int | None) -> Any:
    """CuTe's fake tensor of this layout (`runtime.make_fake_tensor`), which also answers the layout
    marks a program puts on `from_dlpack`'s tensor: `mark_layout_dynamic(leading_dim)` (every
    extent and stride a runtime value but the leading dimension's stride, 1) and
    `mark_compact_shape_dynamic(mode, ...)` (that extent a runtime value), each a new fake tensor
    with CuTe's own symbolic integers (`cute.sym_int`) where the marks make values dynamic."""
    import cutlass.cute as cute
    import cutlass.cute.runtime as runtime
    fake = runtime.make_fake_tensor(dtype, shape, stride, memspace=cute.AddressSpace.gmem, assumed_align=assumed_align)

    def layout_dynamic(leading_dim: int | None = None) -> Any:
        if leading_dim is None:
            ones = [i for i, st in enumerate(stride) if st == 1]
            leading_dim = ones[0] if len(ones) == 1 else next((i for i in ones if shape[i] > 1), None)
        strides = tuple(1 if i == leading_dim else cute.sym_int() for i in range(len(stride)))
        return fake_cute_tensor(dtype, tuple(cute.sym_int() for _ in shape), strides, assumed_align)

    def compact_shape_dynamic(mode: int, stride_order: Any = None, divisibility: int = 1, **kwargs: Any) -> Any:
        extents = tuple(cute.sym_int(divisibility=divisibility) if i == mode else n for i, n in enumerate(shape))
        return fake_cute_tensor(dtype, extents, stride, assumed_align)

    fake.mark_layout_dynamic = layout_dynamic
    fake.mark_compact_shape_dynamic = compact_shape_dynamic
    # `tensor.element_type = cutlass.Float8E4M3FN` on a from_dlpack tensor reinterprets its storage
    # (FP8 kept in uint8: DLPack has no FP8); CuTe's fake tensors refuse it, so the same layout is
    # made again with the new type (VirtualLaunches.installed routes the setter here)
    fake._irscope_retyped = lambda new_type: fake_cute_tensor(new_type, shape, stride, assumed_align)
    return fake


def _adapted(arg: Any, from_dlpack: Callable[..., Any]) -> Any:
    """A torch FakeTensor given to a CuTe function as it is (`cute.compile(fn, torch_tensor)`) as
    CuTe's own TensorAdapter takes a torch tensor, `from_dlpack(t).mark_layout_dynamic()`, but to
    CuTe's fake tensor (the adapter asks the tensor's data pointer, which a fake one has not);
    any other argument as it is."""
    from torch._subclasses.fake_tensor import FakeTensor
    return from_dlpack(arg).mark_layout_dynamic() if isinstance(arg, FakeTensor) else arg


def _retype(tensor: Any, new_type: Any, original: property) -> None:
    """The element_type setter of CuTe's fake tensors while a job runs: an irscope fake (made for a
    FakeTensor passed to from_dlpack) takes the type; any other keeps CuTe's own answer."""
    retyped = getattr(tensor, "_irscope_retyped", None)
    if retyped is None:
        original.fset(tensor, new_type)
        return
    tensor._typed_tensor = retyped(new_type)._typed_tensor


class VirtualLaunches:
    """Records every call of a compiled CuTe function; on a virtual target also makes FakeTensors
    into CuTe fake tensors and compiles instead of running (module docstring)."""

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

        saved = {(JitCompiledFunction, "__call__"): JitCompiledFunction.__call__,
                 (BaseDSL, "_prepare_compilation"): BaseDSL._prepare_compilation,
                 (runtime, "from_dlpack"): runtime.from_dlpack}
        if "cutlass.torch" in sys.modules:
            saved[(sys.modules["cutlass.torch"], "from_dlpack")] = sys.modules["cutlass.torch"].from_dlpack
        recorder, real_call, real_prepare, real_from_dlpack = self, JitCompiledFunction.__call__, \
            BaseDSL._prepare_compilation, runtime.from_dlpack

        def call(compiled: Any, *args: Any, **kwargs: Any) -> Any:
            recorder.launches.append(Launch(compiled.function_name, _calling_line(recorder.path),
                                            "compiled function called", not recorder.virtual))
            return 0 if recorder.virtual else real_call(compiled, *args, **kwargs)

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
            if not isinstance(tensor, FakeTensor):
                return real_from_dlpack(tensor, assumed_align, use_32bit_stride, **kwargs)
            return fake_cute_tensor(cute_dtype(tensor.dtype), tuple(tensor.shape), tuple(tensor.stride()),
                                    assumed_align)

        JitCompiledFunction.__call__ = call
        BaseDSL._prepare_compilation = prepare
        if self.virtual:
            for owner, name in list(saved):
                if name == "from_dlpack":
                    setattr(owner, name, from_dlpack)
            fake_type = runtime._FakeTensor
            original = saved[(fake_type, "element_type")] = fake_type.__dict__["element_type"]
            fake_type.element_type = property(original.fget, lambda t, new_type: _retype(t, new_type, original))
        try:
            yield
        finally:
            for (owner, name), value in saved.items():
                setattr(owner, name, value)


class NoCuteType(UserFacing, TypeError):
    """A tensor of a dtype CuTe has no element type for, passed to a CuTe kernel."""


def cute_dtype(dtype: Any) -> Any:
    """CuTe's element type for a torch dtype, as `from_dlpack` reads it from the DLPack dtype."""
    import cutlass
    import torch
    table = {torch.float16: cutlass.Float16, torch.bfloat16: cutlass.BFloat16, torch.float32: cutlass.Float32,
             torch.float64: cutlass.Float64, torch.int8: cutlass.Int8, torch.int16: cutlass.Int16,
             torch.int32: cutlass.Int32, torch.int64: cutlass.Int64, torch.uint8: cutlass.Uint8,
             torch.bool: cutlass.Boolean, torch.float8_e4m3fn: cutlass.Float8E4M3FN,
             torch.float8_e5m2: cutlass.Float8E5M2}
    if dtype not in table:
        raise NoCuteType(f"a {dtype} tensor has no CuTe element type here (known: "
                        f"{', '.join(str(d).removeprefix('torch.') for d in table)})")
    return table[dtype]
