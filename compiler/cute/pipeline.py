"""The `cute` language: NVIDIA's CuTe DSL (`nvidia-cutlass-dsl`), `@cute.kernel` and `@cute.jit`
functions and the Python that compiles and calls them.

The program runs as pasted. CuTe DSL compiles each `@cute.jit` function (with the kernels it
launches) through its MLIR pipeline to PTX and a cubin, in process and without a GPU; what it
compiled is read back from its own dumps (compiler/cute/capture.py). On a target the worker does
not have, tensors are fake and nothing is launched (capture.VirtualLaunches). Per compiled
function: the CuTe IR as traced (linked to the user's lines by its `loc()`s), the IR after
canonicalize+cse, the PTX and the SASS (linked by their line info), ptxas's report and the cubin's
resource usage per kernel, and the job's kernel resources table.

Stage keys: `cute.<stage>:<function>`, the `@cute.jit` function's name, `.<n>` from its second
compile on (other argument types, other constants).
"""
from __future__ import annotations

import contextlib
import os
import re

from compiler.errors import ErrorKind
from compiler.kernels.toolchain_cache import VirtualDeviceCache
from compiler.model import Request
from compiler.pipeline import JobContext, Option, Pipeline, UserError
from compiler.targets import TARGETS, describe_target, get_target, resolve

SOURCE_NAME = "kernels.py"

EXAMPLE = '''\
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack


@cute.kernel
def add_kernel(gA: cute.Tensor, gB: cute.Tensor, gC: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    thread_idx = bidx * bdim + tidx
    m, n = gA.shape
    ni = thread_idx % n
    mi = thread_idx // n
    gC[mi, ni] = gA[mi, ni] + gB[mi, ni]


@cute.jit
def add(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor):
    threads = 256
    m, n = mA.shape
    add_kernel(mA, mB, mC).launch(grid=((m * n) // threads, 1, 1), block=(threads, 1, 1))


M, N = 2048, 2048
a = torch.randn(M, N, device="cuda", dtype=torch.float16)
b = torch.randn(M, N, device="cuda", dtype=torch.float16)
c = torch.zeros(M, N, device="cuda", dtype=torch.float16)
a_, b_, c_ = [from_dlpack(t, assumed_align=16) for t in (a, b, c)]
add_compiled = cute.compile(add, a_, b_, c_)
add_compiled(a_, b_, c_)
'''

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class CutePipeline(VirtualDeviceCache, Pipeline):
    key = "cute"
    title = "CuTe DSL"
    accepts = ("`@cute.kernel` and `@cute.jit` functions (`nvidia-cutlass-dsl`) and the Python that compiles "
               "(`cute.compile`) and calls them")
    editor_mode = "python"
    source_markers = ("import cutlass.cute", "@cute.jit", "@cute.kernel")
    toolchain_packages = ("nvidia-cutlass-dsl", "torch")
    example = EXAMPLE
    # cutlass is not imported before the job: CuTe reads its variables (the arch) on first use
    prewarm_modules = ("torch", "torch._subclasses.fake_tensor", "compiler.cute.capture",
                       "compiler.kernels.nvidia_tools", "compiler.kernels.gpu_lines")
    options = (
        Option("target", "choice", "auto", "NVIDIA GPU to compile for (CuTe's CUTE_DSL_ARCH: sm_80, sm_90a, "
               "sm_100a). auto: this worker's CUDA device if it has one, else cuda:sm_90. A target this worker "
               "does not have is virtual: tensors are fake, functions are compiled, nothing runs.",
               choices=("auto", *(name for name, t in TARGETS.items() if t.is_cuda))),
        Option("lineinfo", "bool", True, "Compile with CuTe's line info (CUTE_DSL_LINEINFO), which links PTX "
               "and SASS lines to yours; off compiles exactly CuTe's default (no .loc lines)."),
    )

    def environment(self, request: Request, workdir: str) -> dict[str, str]:
        from compiler.cute import capture
        # the target's arch is set in run(), once "auto" is resolved; cutlass reads it on first use
        return capture.environment(workdir, bool(request.options.get("lineinfo", True)))

    def run(self, request: Request, ctx: JobContext) -> None:
        if self.exported(ctx):  # the trusted warm-up job: the cache is the virtual device's library
            return
        from compiler import user_code
        from compiler.cute import capture
        workdir, bundle = ctx.workdir, ctx.bundle
        path = user_code.write_checked_user_file(request.source, SOURCE_NAME, workdir)

        import torch

        real = _real_cuda_target()
        target = get_target(resolve(request.options["target"], [real] if real in TARGETS else []))
        execute = real is not None and real == target.name
        os.environ.update(capture.arch_environment(target))
        os.makedirs(os.path.join(workdir, capture.DUMP_DIR), exist_ok=True)
        target_info = describe_target(target, execute, real, torch.cuda.get_device_name(0) if execute else None)
        target_info["cute_arch"] = capture.cute_arch(target)
        if execute:
            target_info["note"] = "ran on the worker's GPU (not timed)"
        bundle.timing("target", target_info)
        bundle.progress(f"running the program for {target.name}" + ("" if execute else " (virtual)"))

        from compiler.kernels import fake_modules
        from compiler.kernels.capture import diagnostics_kept
        from compiler.kernels.value_reads import stopped_at_value_reads
        from compiler.kernels.virtual_checks import VirtualChecks
        launches = capture.VirtualLaunches(path, virtual=not execute)
        checks = VirtualChecks(path)
        sink = user_code.CappedText(ctx.settings.output_bytes)
        stderr_file = os.path.join(workdir, "stderr-while-running.txt")
        with contextlib.ExitStack() as stack:
            if not execute:
                from torch._subclasses.fake_tensor import FakeTensorMode

                from compiler.cute import virtual_device
                from compiler.targets import virtual_gpu
                # .cuda() and the device's factory calls on fake tensors, torch.cuda as the examples ask it
                runtime = virtual_gpu.runtime_for_job(ctx.toolchain_cache, workdir)
                virtual_gpu.install_cuda_hooks(runtime)
                target_info.update(runtime.report())
                bundle.timing("target", target_info)
                virtual_gpu.install_program_cuda(target, path)
                stack.enter_context(checks.installed(("cutlass",)))  # checks and benchmarks: no values
                stack.enter_context(virtual_device.answered(target, checks))  # the driver's questions
                stack.enter_context(stopped_at_value_reads(path))  # a value read ends the program there
                stack.enter_context(fake_modules.convertible())  # model.to(DEVICE) of a fake module
                stack.enter_context(FakeTensorMode(allow_non_fake_inputs=True))
            stack.enter_context(diagnostics_kept(stderr_file))
            stack.enter_context(launches.installed())

            def explain(e: BaseException) -> UserError | None:
                return None if not execute and checks.stopped(e, path) else self._error(e, path, execute, ctx)
            _, error = user_code.run_as_main(path, sink, explain)
        del torch

        with open(stderr_file, encoding="utf-8", errors="replace") as f:
            remarks = _ANSI.sub("", f.read(1 << 22))
        compiled = capture.read_dump(os.path.join(workdir, capture.DUMP_DIR))
        from compiler.cute.stages import write_function_stages
        write_function_stages(bundle, compiled, launches.launches, launches.python_names, remarks, path, workdir,
                              target, target_info)
        bundle.add("run.stdout", "Program output", "Run", "text", sink.getvalue(),
                   meta=user_code.program_output_meta(sink.getvalue(), target.name, execute))
        checks.add_stage(bundle)
        if error is not None:
            raise error
        if not compiled:
            raise UserError(ErrorKind.InputError, user_code.compiled_nothing(
                "the program compiled no CuTe function: compile one with cute.compile(fn, *args) or call a "
                "@cute.jit function", sink.getvalue(), target.name), None)

    def _error(self, exc: BaseException, path: str, execute: bool, ctx: JobContext) -> UserError:
        """CuTe's own errors name the user's line (`--> kernels.py:14:9`) in their text; its colours go."""
        from compiler import user_code
        error = user_code.user_error(exc, path, ctx.settings)
        message = _ANSI.sub("", error.error.message)
        named = re.findall(rf"-->\s*{re.escape(path)}:(\d+)", _ANSI.sub("", str(exc)))
        line = int(named[0]) if named else error.error.line
        message = re.sub(r"^line \d+: ", "", message)
        message = re.sub(r"\n\s*\n+", "\n", message).strip()
        if not execute and re.search(r"FakeTensor|Cannot access data pointer|item\(\)|cudaError|CUDA driver",
                                     message):
            message += ("\n(on a virtual target tensors are fake: shapes and dtypes only, no values; nothing "
                        "runs. Functions compiled before this line are shown.)")
        elif not execute and isinstance(exc, AssertionError):
            message += ("\n(on a virtual target nothing runs, so a check of what a run did (a value a kernel "
                        "wrote, an error a launch raised) cannot hold. Functions compiled before this line are "
                        "shown.)")
        # CuTe's own compile errors are DSL...Error; its DSLCudaRuntimeError is a CUDA call that failed as it ran
        compile_error = "DSL" in type(exc).__name__ and "Cuda" not in type(exc).__name__
        return UserError(ErrorKind.CompileError if compile_error else error.error.kind,
                         (f"line {line}: " if line else "") + message, line)


def _real_cuda_target() -> str | None:
    from compiler.targets import virtual_gpu
    real = virtual_gpu.real_cuda_target_name()
    return real if real and real.startswith("cuda:") else None
