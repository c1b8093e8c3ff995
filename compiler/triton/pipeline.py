"""The `triton` language: `@triton.jit` kernels plus the Python that allocates tensors and launches them.

On a host without the chosen GPU the program runs under a FakeTensorMode with Triton's
compile-only driver (compiler/targets/virtual_gpu.py): each `kernel[grid](...)` compiles the kernel
for the target and is recorded (grid, argument types, constexprs), never executed. With a real CUDA
device that matches the target, the program runs for real and each launch is timed with
`triton.testing.do_bench`.

Every compilation is captured from Triton itself (compiler/triton/capture.py) and written as
stages by compiler/triton/kernel_stages.py; launches are recorded by compiler/triton/launches.py.

The `gluon` language (GluonPipeline, below) is Triton's lower-level kernel language
(`triton.experimental.gluon`): `@gluon.jit` kernels whose layouts the author writes out
(`gl.BlockedLayout`, slices, shared layouts). A Gluon kernel enters Triton's compiler at TTGIR
(no TTIR: the layouts are the user's) and is compiled, captured and launched by the same machinery
as a `@triton.jit` one, so it is this pipeline with its own example, markers and spare imports.

Stage keys, per compiled kernel: `triton.<stage>:<kernel>`; a kernel compiled more than once (other
argument specialisations, autotune configs) gets `:<kernel>.<n>`, n counting compilations from 0.
"""
from __future__ import annotations

import contextlib
import os
import re
from typing import Any

from compiler.errors import ErrorKind
from compiler.kernel_resources import write_resource_table
from compiler.model import Request
from compiler.pipeline import Bundle, JobContext, Option, Pipeline, UserError
from compiler.targets import DEFAULT_VIRTUAL_TARGET, TARGETS, GpuTarget, describe_target, get_target
from compiler.triton.capture import KernelCapture, diagnostics_kept, first_mlir_error, qualifiers
from compiler.triton.kernel_stages import write_kernel_stages
from compiler.triton.launches import LaunchRecorder

SOURCE_NAME = "kernels.py"

EXAMPLE = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * row_stride + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * row_stride + offs, num / tl.sum(num, axis=0), mask=mask)


x = torch.randn(4096, 781, device="cuda")
out = torch.empty_like(x)
softmax_kernel[(x.shape[0],)](out, x, x.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
print(out.shape)
'''

GLUON_EXAMPLE = '''\
import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def softmax_kernel(out_ptr, in_ptr, row_stride, n_cols, BLOCK: gl.constexpr):
    # the layout is written out: each thread holds 4 neighbouring columns, a warp 128, the 4 warps 512
    layout: gl.constexpr = gl.BlockedLayout(size_per_thread=[4], threads_per_warp=[32], warps_per_cta=[4],
                                            order=[0])
    row = gl.program_id(0)
    offs = gl.arange(0, BLOCK, layout=layout)
    mask = offs < n_cols
    x = gl.load(in_ptr + row * row_stride + offs, mask=mask, other=-float("inf"))
    x = x - gl.max(x, axis=0)
    num = gl.exp(x)
    gl.store(out_ptr + row * row_stride + offs, num / gl.sum(num, axis=0), mask=mask)


x = torch.randn(4096, 781, device="cuda")
out = torch.empty_like(x)
softmax_kernel[(x.shape[0],)](out, x, x.stride(0), x.shape[1], BLOCK=1024, num_warps=4)
print(out.shape)
'''


def _target_help() -> str:
    return ("GPU to compile for. auto: this worker's CUDA device if it has one, else cuda:sm_90. "
            "A target this worker does not have is virtual: kernels are compiled, nothing runs.")


class TritonPipeline(Pipeline):
    key = "triton"
    title = "Triton"
    editor_mode = "python"
    source_markers = ("@triton.jit",)
    toolchain_packages = ("triton", "torch")
    example = EXAMPLE
    # A spare worker imports these before its job (environment() does not depend on the request);
    # no warm-up compile: the virtual target's driver and the capture hooks are per job.
    prewarm_modules = ("torch", "torch._subclasses.fake_tensor", "triton", "triton.language",
                       "triton.compiler.compiler", "triton.backends.nvidia.compiler", "compiler.targets.virtual_gpu",
                       "compiler.triton.capture", "compiler.triton.kernel_stages", "compiler.triton.launches")
    options = (
        Option("target", "choice", "auto", _target_help(), choices=("auto", *TARGETS)),
    )
    _launched: list[Any] = []  # the JITFunctions the failing run had reached (for compile errors)
    _capture: KernelCapture | None = None  # the run's capture (for ptxas's errors)

    def environment(self, request: Request, workdir: str) -> dict[str, str]:
        return {
            "TRITON_CACHE_DIR": os.path.join(workdir, "triton-cache"),
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(workdir, "inductor-cache"),
            "TRITON_DUMP_DIR": os.path.join(workdir, "triton-dump"),
            # per-pass dumps: Triton's pass managers print the IR before every pass (to stderr,
            # which KernelCapture points at one file per stage while the stage runs)
            "MLIR_ENABLE_DUMP": "1",
            # Triton 3.9 warns when unset; 1 is its current default (FMA fusion on), said explicitly
            "TRITON_DEFAULT_FP_FUSION": "1",
        }

    def run(self, request: Request, ctx: JobContext) -> None:
        from compiler import user_code
        workdir, bundle = ctx.workdir, ctx.bundle
        path = user_code.write_checked_user_file(request.source, SOURCE_NAME, workdir)

        import warnings

        import torch

        from compiler.targets import virtual_gpu
        virtual_gpu.check_versions()
        real = virtual_gpu.real_cuda_target_name()
        name = request.options.get("target", "auto")
        if name == "auto":
            target = _real_target(real) if real else get_target(DEFAULT_VIRTUAL_TARGET)
        else:
            target = get_target(name)
        execute = real is not None and real == target.name
        bundle.progress(f"running the program for {target.name}" + ("" if execute else " (virtual)"))
        target_info = describe_target(target, execute, real, torch.cuda.get_device_name(0) if execute else None)
        bundle.timing("target", target_info)

        capture = self._capture = KernelCapture(os.path.join(workdir, "mlir-passes"))
        recorder = LaunchRecorder(path, execute)
        sink = user_code.CappedText(ctx.settings.output_bytes)
        error: UserError | None = None
        namespace: dict[str, Any] = {}
        with contextlib.ExitStack() as stack:
            if not execute:
                self._install_virtual(target, ctx)
                from torch._subclasses.fake_tensor import FakeTensorMode
                stack.enter_context(FakeTensorMode(allow_non_fake_inputs=True))
                # Triton reads data_ptr() for alignment; a fake tensor answers 0 (aligned) with a warning
                warnings.filterwarnings("ignore", message="Accessing the data pointer of FakeTensor")
            stack.enter_context(capture.installed())
            stack.enter_context(recorder.installed())
            stack.enter_context(diagnostics_kept(self._diagnostics_file(workdir)))
            self._enter_language(stack, execute)
            try:
                with user_code.captured_stdout(sink):
                    import runpy
                    namespace = runpy.run_path(path, run_name="__main__")
                self._after_program(request, bundle)
            except SystemExit as e:
                if e.code not in (None, 0):
                    error = UserError(ErrorKind.UserCodeError, f"the program called exit({e.code})", None)
            except BaseException as e:  # noqa: BLE001 - every failure of user code becomes a job error
                if isinstance(e, KeyboardInterrupt):
                    raise
                self._launched = recorder.seen
                error = self._error(e, path, execute, ctx)
        del torch

        self._write_stages(bundle, capture, recorder, path, workdir, target_info)
        output = sink.getvalue()
        bundle.add("run.stdout", "Program output", "Run", "text", output,
                   meta={"target": target.name, "executed": execute})
        if error is not None:
            raise error
        if not capture.ordered():
            raise UserError(ErrorKind.InputError, "the program compiled no Triton kernel: launch one with "
                                                  "kernel[grid](...) or compile one with kernel.warmup(...)", None)
        del namespace

    def _error(self, exc: BaseException, path: str, execute: bool, ctx: JobContext) -> UserError:
        from triton.compiler.errors import CompilationError

        from compiler import user_code
        # Triton's compile errors point into the kernel's own source; turn that into the file's line
        current: BaseException | None = exc
        while current is not None:
            if isinstance(current, CompilationError):
                line = self._compile_error_line(current, path)
                message = f"line {line}: {current}" if line else str(current)
                if not current.error_message:  # the reason is MLIR's diagnostic, printed, not raised
                    diagnostic = first_mlir_error(self._diagnostics_file(ctx.workdir))
                    message += f"\n{diagnostic}" if diagnostic else ""
                return UserError(ErrorKind.CompileError, message, line)
            current = current.__cause__ or current.__context__
        rejected = self._ptxas_error(exc, path)
        if rejected is not None:
            return rejected
        error = user_code.user_error(exc, path, ctx.settings)
        message = f"{type(exc).__name__}: {exc}"
        if not execute and re.search(r"DataDependent|data-dependent|not linked with support for cuda|"
                                     r"FakeTensor|Cannot access data pointer|item\(\)", message):
            error = UserError(error.error.kind, error.error.message + "\n(on a virtual target tensors are fake: "
                              "shapes and dtypes only, no values; nothing ran, so results cannot be read or "
                              "printed. Kernels compiled before this line are shown.)", error.error.line)
        return error

    def _ptxas_error(self, exc: BaseException, path: str) -> UserError | None:
        """ptxas rejected a kernel's PTX ("line 43; error : Instruction 'wgmma.fence' not supported on
        .target 'sm_80'"): the user's line that PTX line came from, by the PTX's own `.loc`s."""
        from compiler.triton import gpu_lines
        text = str(exc)
        found = re.search(r"line (\d+); error\s*:\s*([^\n]+)", text)
        if found is None or "ptxas" not in text.lower() or self._capture is None:
            return None
        failing = [r for r in self._capture.records.values() if r.ptx_given_to_ptxas and not r.complete]
        if not failing:
            return None
        record = failing[-1]
        ptx_line, reason = int(found.group(1)), found.group(2).strip()
        lines = dict(map(tuple, gpu_lines.ptx_source_map(record.ptx_given_to_ptxas, path)))
        line = lines.get(ptx_line)
        if line is None:
            return None
        from compiler import user_code
        launched = user_code.user_line(exc, path)
        entry = re.search(r"\.entry (\w+)", record.ptx_given_to_ptxas)
        name = record.name or (entry.group(1) if entry else "?")
        return UserError(ErrorKind.CompileError,
                         f"line {line}: ptxas rejected the PTX of kernel {name}: {reason} (PTX line {ptx_line}"
                         + (f"; the kernel was launched at line {launched}" if launched else "") + ")", line)

    # --- what a language built on this pipeline changes (GluonPipeline, HelionPipeline) ----------

    def _install_virtual(self, target: GpuTarget, ctx: JobContext) -> None:
        """Make Triton compile for the virtual `target` (its compile-only driver)."""
        from compiler.targets import virtual_gpu
        virtual_gpu.install_compile_only_triton(target)

    def _enter_language(self, stack: contextlib.ExitStack, execute: bool) -> None:
        """Install what records the language's own steps while the program runs."""

    def _kernel_source(self, record: Any, path: str) -> tuple[str, tuple[str, int] | None, Any]:
        """(the file the kernel's compiler locations name, its source and first line when it is
        one to show, a map from that file's lines to the user's or None for the identity)."""
        return path, ((record.source, record.def_line) if record.source_file == path else None), None

    def _write_language_stages(self, bundle: Bundle, path: str) -> None:
        """The language's own stages, before its kernels'."""

    def _after_program(self, request: Request, bundle: Bundle) -> None:
        """What the language compiles once the program has run (still captured)."""

    @staticmethod
    def _diagnostics_file(workdir: str) -> str:
        return os.path.join(workdir, "stderr-while-running.txt")

    def _compile_error_line(self, error: Any, path: str) -> int | None:
        node_line = getattr(getattr(error, "node", None), "lineno", None)
        if node_line is None or not error.src:
            return None
        from triton.runtime.jit import JITFunction
        # the failing function is a launched kernel or a @triton.jit helper among its globals
        candidates: list[Any] = []
        for fn in self._launched:
            candidates.append(fn)
            candidates.extend(v for v in getattr(fn, "__globals__", {}).values() if isinstance(v, JITFunction))
        for fn in candidates:
            if getattr(fn, "file_name", "") == path and fn.src == error.src:
                return fn.def_file_line_number + node_line - 1
        return None

    def _write_stages(self, bundle: Bundle, capture: KernelCapture, recorder: LaunchRecorder, path: str,
                      workdir: str, target_info: dict[str, Any]) -> None:
        records = capture.ordered()
        names = qualifiers(records)
        by_hash = {r.hash: q for r, q in zip(records, names)}
        rows = []
        self._write_language_stages(bundle, path)
        for record, qualifier in zip(records, names):
            bundle.progress(f"writing stages of {qualifier}")
            located, source, to_user = self._kernel_source(record, path)
            rows.append(write_kernel_stages(bundle, record, qualifier, workdir, located, python_source=source,
                                            map_to_user=to_user,
                                            extra_meta={"virtual": target_info["virtual"],
                                                        "executed": not target_info["virtual"]}))
        write_resource_table(bundle, rows, "Triton")
        launches = []
        for launch in recorder.launches:
            entry = launch.__dict__.copy()
            entry["stage_qualifier"] = by_hash.get(launch.compile_hash)
            launches.append(entry)
        bundle.add("triton.launches", "Launches", "Run", "json", launches,
                   source_map=[], meta={"count": len(launches), **target_info,
                                        "autotune": "on a virtual target every @triton.autotune config is "
                                                    "compiled (one stage set each) and the first is launched; "
                                                    "nothing is benchmarked" if target_info["virtual"] else
                                                    "autotuning benchmarked on the device; the chosen config "
                                                    "is the launched one"})
        if not target_info["virtual"]:
            bundle.timing("kernels", [{"kernel": l.kernel, "line": l.line, **(l.timing_ms or {})}
                                      for l in recorder.launches])


def _real_target(name: str) -> GpuTarget:
    """The worker's own device as a target, also when it is none of the listed ones (sm_89, ...)."""
    if name in TARGETS:
        return TARGETS[name]
    import dataclasses

    import torch
    backend, arch = name.split(":", 1)
    template = get_target("hip:gfx942" if backend == "hip" else DEFAULT_VIRTUAL_TARGET)
    return dataclasses.replace(template, name=name, arch=int(arch[3:]) if backend == "cuda" else arch,
                               product=torch.cuda.get_device_name(0))


class GluonPipeline(TritonPipeline):
    key = "gluon"
    title = "Gluon"
    source_markers = ("@gluon.jit",)
    example = GLUON_EXAMPLE
    prewarm_modules = (*TritonPipeline.prewarm_modules, "triton.experimental.gluon",
                       "triton.experimental.gluon.language")


HELION_EXAMPLE = '''\
import torch
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[64, 64, 32], num_warps=4, num_stages=3))
def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    k2, n = y.size()
    assert k == k2, f"size mismatch {k} != {k2}"
    out = torch.empty([m, n], dtype=torch.promote_types(x.dtype, y.dtype), device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc
    return out


@helion.kernel()  # no config: on a GPU Helion autotunes; a virtual target takes its default config
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


x = torch.randn(1024, 512, device="cuda", dtype=torch.float16)
y = torch.randn(512, 1024, device="cuda", dtype=torch.float16)
z = add(matmul(x, y), matmul(x, y))
print(z.shape)
'''


class HelionPipeline(TritonPipeline):
    """The `helion` language: `@helion.kernel` functions (PyTorch's kernel DSL) and the code that
    calls them on CUDA tensors. Helion generates a Triton module per kernel and config; this
    pipeline records each (compiler/triton/helion_kernels.py) and compiles it through Triton like
    any kernel, its lines linked to the user's through Helion's own `# src[file:line]` comments.
    On a virtual target the CUDA device is the one PyTorch's virtual GPU path installs (Helion reads
    its properties and makes tensors on it)."""

    key = "helion"
    title = "Helion"
    source_markers = ("@helion.kernel",)
    toolchain_packages = ("helion", "triton", "torch")
    example = HELION_EXAMPLE
    prewarm_modules = (*TritonPipeline.prewarm_modules, "helion", "helion.language", "compiler.triton.helion_kernels")
    options = (
        Option("target", "choice", "auto", "CUDA GPU to compile for. auto: this worker's CUDA device if it has one, "
               "else cuda:sm_90. A target this worker does not have is virtual: kernels are compiled, nothing runs, "
               "and Helion's default or first config is used (autotuning times candidates on a GPU).",
               choices=("auto", *(name for name, t in TARGETS.items() if t.is_cuda))),
        Option("configs", "int", 1, "Configs of each kernel to compile: 1, the one chosen; N, that one and N-1 "
               "sampled from Helion's config space for the kernel's inputs (seed 0), each with its own stages, "
               "to diff any two.", minimum=1, maximum=8),
    )

    def _install_virtual(self, target: GpuTarget, ctx: JobContext) -> None:
        from compiler.targets import virtual_gpu
        virtual_gpu.install_virtual_cuda(target, virtual_gpu.runtime_for_job(ctx.toolchain_cache, ctx.workdir))

    def _enter_language(self, stack: contextlib.ExitStack, execute: bool) -> None:
        from compiler.triton.helion_kernels import HelionRecorder
        self._helion = HelionRecorder(virtual=not execute)
        stack.enter_context(self._helion.installed())

    def _after_program(self, request: Request, bundle: Bundle) -> None:
        total = int(request.options.get("configs", 1))
        if total > 1:
            bundle.progress(f"compiling {total - 1} sampled configs of each kernel")
            self._helion.compile_samples(total)

    def _error(self, exc: BaseException, path: str, execute: bool, ctx: JobContext) -> UserError:
        """Helion runs the kernel's host code from its generated module: an error raised there (an
        assert on the inputs' shapes) names the user's line that module line came from."""
        import traceback
        error = super()._error(exc, path, execute, ctx)
        modules = self._modules(path)
        inner = [(f.filename, f.lineno) for f in traceback.extract_tb(exc.__traceback__) if f.filename in modules]
        line = modules[inner[-1][0]][1].get(inner[-1][1] or 0) if inner else None
        if line is None or error.error.kind != ErrorKind.UserCodeError:
            return error
        called = error.error.line
        called = f", in the code Helion generated from it, called at line {called}" if called else ""
        message = re.sub(r"^line \d+: ", "", error.error.message)
        return UserError(error.error.kind, f"line {line}: {message}{called}", line)

    def _modules(self, path: str) -> dict[str, tuple[str, dict[int, int]]]:
        """Helion's generated module file -> (its text, its lines' user lines)."""
        from compiler.triton.helion_kernels import user_lines
        modules = {}
        for compiled in self._helion.compiles:
            with open(compiled.module_file, encoding="utf-8", errors="replace") as f:
                text = f.read()
            modules[compiled.module_file] = (text, user_lines(text, path))
        return modules

    def _kernel_source(self, record: Any, path: str) -> tuple[str, tuple[str, int] | None, Any]:
        module = self._modules(path).get(record.source_file)
        if module is None:
            return super()._kernel_source(record, path)
        lines = module[1]
        return record.source_file, (record.source, record.def_line), lines.get

    def _write_language_stages(self, bundle: Bundle, path: str) -> None:
        from compiler.triton.helion_kernels import space_table
        modules = self._modules(path)
        counts: dict[str, int] = {}
        if self._helion.failed_samples:
            bundle.add("helion.failed_samples", "Sampled configs not compiled", "Helion", "text",
                       "\n".join(self._helion.failed_samples) + "\n",
                       meta={"count": len(self._helion.failed_samples)})
        for compiled in self._helion.compiles:
            counts[compiled.kernel] = counts.get(compiled.kernel, 0) + 1
        seen: dict[str, int] = {}
        for compiled in self._helion.compiles:
            n = seen.get(compiled.kernel, 0)
            seen[compiled.kernel] = n + 1
            q = f"{compiled.kernel}.{n}" if counts[compiled.kernel] > 1 else compiled.kernel
            text, lines = modules[compiled.module_file]
            meta = {"kernel": compiled.kernel, "chosen": compiled.chosen}
            bundle.add(f"helion.config:{q}", f"Config {q}", "Helion", "json",
                       {"kernel": compiled.kernel, "chosen": compiled.chosen, "config": compiled.config,
                        "decorator": compiled.decorator, "search_space": compiled.search_space}, meta=meta)
            bundle.add(f"helion.config_space:{q}", f"Config space {q}", "Helion", "text", space_table(compiled),
                       meta={**meta, "source": "Helion's ConfigSpec.iter_search_dimensions() for these inputs"})
            bundle.add(f"helion.triton_code:{q}", f"Triton code {q}", "Helion", "python", text,
                       source_map=[[line, user] for line, user in sorted(lines.items())],
                       meta={**meta, "note": "the Triton module Helion generated and Triton compiled; its "
                                             "# src[file:line] comments, Helion's own, link it to your lines"})
