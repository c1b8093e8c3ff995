"""A program that compiles GPU kernels through Triton, run as pasted: the run every language built
on Triton's compiler shares (`triton`, `gluon`, `helion`), each a leaf package with its own facts
and a few hooks (`_install_virtual`, `_enter_language`, `_after_program`, `_kernel_source`,
`_write_language_stages`, `_error`).

On a host without the chosen GPU the program runs under a FakeTensorMode with Triton's
compile-only driver (compiler/targets/virtual_gpu.py): each `kernel[grid](...)` compiles the kernel
for the target and is recorded (grid, argument types, constexprs), never executed. With a real CUDA
device that matches the target, the program runs for real and each launch is timed with
`triton.testing.do_bench`.

Every compilation is captured from Triton itself (compiler/kernels/capture.py) and written as
stages by compiler/kernels/stages.py; launches are recorded by compiler/kernels/launches.py.

Stage keys, per compiled kernel: `triton.<stage>:<kernel>`; a kernel compiled more than once (other
argument specialisations, autotune configs) gets `:<kernel>.<n>`, n counting compilations from 0.
"""
from __future__ import annotations

import contextlib
import os
import re
from typing import Any, Callable
from unittest import mock

from compiler.errors import ErrorKind
from compiler.kernels import compile_only, fake_modules
from compiler.kernels.capture import KernelCapture, diagnostics_kept, first_mlir_error, qualifiers
from compiler.kernels.jit_location import jit_def_line, jit_file
from compiler.kernels.launches import LaunchRecorder
from compiler.kernels.resources import write_resource_table
from compiler.kernels.stages import write_kernel_stages
from compiler.kernels.toolchain_cache import VirtualDeviceCache
from compiler.kernels.value_reads import stopped_at_value_reads
from compiler.kernels.virtual_checks import VirtualChecks
from compiler.model import Request
from compiler.pipeline import Bundle, JobContext, Option, Pipeline, UserError, lacks_release
from compiler.targets import DEFAULT_VIRTUAL_TARGET, TARGETS, GpuTarget, describe_target, get_target, resolve

SOURCE_NAME = "kernels.py"  # the program's file in the job (its lines are the stages' source lines)
# what that file is, where a stage's text names it (stage meta `file_names`: `name`, `about`)
USERS_FILE_NAME = "your source, the program in the editor"
USERS_FILE_ABOUT = ("the job runs the editor's text as a file named {file}, so the compiler's locations name "
                    "that file; its lines are your lines")
# What a spare of any of these languages imports before its job (environment() does not depend on
# the request); no warm-up compile: the virtual target's driver and the capture hooks are per job.
PREWARM_MODULES = ("torch", "torch._subclasses.fake_tensor", "triton", "triton.language",
                   "triton.compiler.compiler", "triton.backends.nvidia.compiler", "compiler.targets.virtual_gpu",
                   "compiler.kernels.capture", "compiler.kernels.stages", "compiler.kernels.launches")


def users_file_names(path: str) -> list[dict[str, str]]:
    """Stage meta `file_names` saying that `path`, the job's copy of the editor's text, which the
    compiler's locations name, is the user's source (shown beside the stage, `about` folded)."""
    name = os.path.basename(path)
    return [{"path": path, "file": name, "name": USERS_FILE_NAME, "about": USERS_FILE_ABOUT.format(file=name)}]


def target_help() -> str:
    return ("GPU to compile for. auto: this worker's CUDA device if it has one, else cuda:sm_90. "
            "A target this worker does not have is virtual: kernels are compiled, nothing runs.")


# The target option of a language whose kernels Triton compiles for any of its targets.
TARGET_OPTION = Option("target", "choice", "auto", target_help(), choices=("auto", *TARGETS))


class TritonProgramPipeline(VirtualDeviceCache, Pipeline):
    """The run of a Triton-compiled program; a language sets its facts (key, title, example,
    markers, options) and overrides the hooks it needs."""

    editor_mode = "python"
    toolchain_packages = ("triton", "torch")
    prewarm_modules = PREWARM_MODULES
    # The reproducer: the program with plain Triton (compiler/kernels/reproducer.py), for every
    # language built on this run.
    reproducer_module = "compiler.kernels.reproducer"
    check_libraries = ("triton",)  # whose checks and benchmarks a virtual target answers (virtual_checks)
    # The stage bar's group of the kernels' stages and their resource table: the language the user wrote
    # them in (Gluon's under "Gluon", as CuTe's under "CuTe"); Helion's are the Triton it generated.
    kernel_group = "Triton"
    # What a program that compiled no kernel is told (each language says how its kernels compile).
    no_kernel = ("the program compiled no Triton kernel: launch one with kernel[grid](...) or compile one with "
                 "kernel.warmup(...)")
    _launched: list[Any] = []  # the JITFunctions the failing run had reached (for compile errors)
    _capture: KernelCapture | None = None  # the run's capture (for ptxas's errors)

    def toolchain_refusal(self, options: dict[str, Any], versions: dict[str, str]) -> str | None:
        """Every target may be virtual (the service does not know the worker's GPU): the Triton must
        be one the compile-only driver is tested on."""
        from compiler.targets import virtual_gpu
        return super().toolchain_refusal(options, versions) or lacks_release(
            versions, "triton", virtual_gpu.COMPILE_ONLY_TRITON, "the virtual GPU's compile-only driver")

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

    def prepare_spare(self, workdir: str, toolchain_cache: str, kind: str = "",
                      job_arrived: Callable[[], bool] = lambda: False, export_toolchain_cache: str = "") -> None:
        """The imports, then the virtual CUDA device's C++ half (compiler/targets/virtual_cuda.cpp)
        built into the job's work directory unless the toolchain cache has it: a CUDA target's job
        then loads it instead of waiting for g++. Built from irscope's own source alone; a failure
        here is left to the job, which builds it again and says why."""
        super().prepare_spare(workdir, toolchain_cache, kind, job_arrived, export_toolchain_cache)
        from compiler.targets import virtual_gpu
        if not virtual_gpu.shim_fits():  # another toolchain's spare: its jobs use the driver alone
            return
        try:
            virtual_gpu.runtime_for_job(toolchain_cache, workdir).wait()
        except RuntimeError:
            pass

    def run(self, request: Request, ctx: JobContext) -> None:
        if self.exported(ctx):  # the trusted warm-up job: the cache is the virtual device's library
            return
        from compiler import user_code
        workdir, bundle = ctx.workdir, ctx.bundle
        path = user_code.write_checked_user_file(request.source, SOURCE_NAME, workdir)

        import warnings

        import torch

        from compiler.targets import virtual_gpu
        virtual_gpu.check_compile_only_triton()
        real = virtual_gpu.real_cuda_target_name()
        name = resolve(request.options["target"], [real] if real else [])
        target = _real_target(name) if name == real else get_target(name)
        execute = real is not None and real == target.name
        bundle.progress(f"running the program for {target.name}" + ("" if execute else " (virtual)"))
        target_info = describe_target(target, execute, real, torch.cuda.get_device_name(0) if execute else None)
        bundle.timing("target", target_info)

        capture = self._capture = KernelCapture(os.path.join(workdir, "mlir-passes"), ctx.settings.pass_dump_bytes)
        recorder = LaunchRecorder(path, execute)
        sink = user_code.CappedText(ctx.settings.output_bytes)
        checks = VirtualChecks(path)
        with contextlib.ExitStack() as stack:
            if not execute:
                runtime = self._install_virtual(target, ctx)
                if runtime is not None:
                    target_info.update(runtime.report())
                    bundle.timing("target", target_info)
                stack.enter_context(checks.installed(self.check_libraries))  # checks, benchmarks: no values
                # a torch.compile baseline compiles as it would, its graphs then run on the fake tensors
                stack.enter_context(mock.patch.object(torch, "compile", compile_only.compiling_only(torch, checks)))
                stack.enter_context(stopped_at_value_reads(path))  # a value read ends the program there
                stack.enter_context(fake_modules.convertible())  # model.to(DEVICE) of a fake module
                from torch._subclasses.fake_tensor import FakeTensorMode
                stack.enter_context(FakeTensorMode(allow_non_fake_inputs=True))
                # Triton reads data_ptr() for alignment; a fake tensor answers 0 (aligned) with a warning
                warnings.filterwarnings("ignore", message="Accessing the data pointer of FakeTensor")
            stack.enter_context(capture.installed())
            stack.enter_context(recorder.installed())
            stack.enter_context(diagnostics_kept(self._diagnostics_file(workdir)))
            self._enter_language(stack, execute, path)

            def explain(e: BaseException) -> UserError | None:
                self._launched = recorder.seen
                if not execute and checks.stopped(e, path):  # the program's end on a virtual target
                    return None
                return self._error(e, path, execute, ctx)
            namespace, error = user_code.run_as_main(path, sink, explain, lambda: self._after_program(request, bundle))
        del torch

        self._write_stages(bundle, capture, recorder, path, workdir, target_info)
        output = sink.getvalue()
        bundle.add("run.stdout", "Program output", "Run", "text", output,
                   meta=user_code.program_output_meta(output, target.name, execute))
        checks.add_stage(bundle)
        if error is not None:
            raise error
        if not capture.ordered():
            raise UserError(ErrorKind.InputError, user_code.compiled_nothing(self.no_kernel, output, target.name), None)
        del namespace

    def _error(self, exc: BaseException, path: str, execute: bool, ctx: JobContext) -> UserError:
        from triton.compiler.errors import CompilationError

        from compiler import user_code
        # Triton's compile errors point into the kernel's own source; turn that into the file's line
        current: BaseException | None = exc
        while current is not None:
            if isinstance(current, CompilationError):
                line = self._compile_error_line(current, path)
                where = f"line {line}: " if line else ""
                # the cause first, on the headline: the message Triton put after the location and
                # the source excerpt, else MLIR's diagnostic (printed, not raised); Triton's text below
                reason = _compile_error_reason(current) or first_mlir_error(self._diagnostics_file(ctx.workdir))
                message = f"{where}{reason}\n\n{current}" if reason else f"{where}{current}"
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
        from compiler.kernels import gpu_lines
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

    # --- what a language built on this run changes (gluon's and helion's pipelines) ---------------

    def _install_virtual(self, target: GpuTarget, ctx: JobContext) -> Any:
        """Make Triton compile for the virtual `target` (its compile-only driver). A CUDA target is
        also a virtual CUDA device for PyTorch (`torch.cuda`'s queries, autograd on the device: the
        tutorials' backward passes) on which a program may load a compiled kernel itself, where the
        toolchain is the one that device is pinned to (another toolchain's Triton: the driver alone).
        The device's library (virtual_gpu.RuntimeBuild) where one was installed, else None."""
        from compiler.targets import virtual_gpu
        if target.is_cuda and virtual_gpu.shim_fits():
            runtime = virtual_gpu.runtime_for_job(ctx.toolchain_cache, ctx.workdir)
            virtual_gpu.install_virtual_cuda(target, runtime)
            virtual_gpu.install_program_device(target, os.path.join(ctx.workdir, SOURCE_NAME))
            return runtime
        virtual_gpu.install_compile_only_triton(target)
        return None

    def _enter_language(self, stack: contextlib.ExitStack, execute: bool, path: str) -> None:
        """Install what records the language's own steps while the program (`path`) runs."""

    def _kernel_source(self, record: Any, path: str) -> tuple[str, tuple[str, int] | None, Any]:
        """(the file the kernel's compiler locations name, its source and first line when it is
        one to show, a map from that file's lines to the user's or None for the identity)."""
        return path, ((record.source, record.def_line) if record.source_file == path else None), None

    def _file_names(self, record: Any, path: str) -> list[dict[str, str]]:
        """What the files a kernel's stages name are, for a reader (stage meta `file_names`: `path`,
        `file`, `name`, `stage`, `about`; shown beside the stage, `about` folded): the job's copy of
        the user's program, the file every location of a kernel the user wrote names (`.loc 1 16 11
        // kernels.py:16:11`), is the source in the editor; a language whose kernels come from a
        generated file says what that file is instead."""
        if record.source_file != path:
            return []
        return users_file_names(path)

    def _complete_row(self, record: Any, row: Any) -> None:
        """What the language knows of a kernel's resource row that Triton's metadata does not say
        (Helion: the config it chose)."""

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
            if jit_file(fn) == path and fn.src == error.src:
                return jit_def_line(fn) + node_line - 1
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
                                            map_to_user=to_user, users_file=True, group=self.kernel_group,
                                            file_names=self._file_names(record, path),
                                            extra_meta={"virtual": target_info["virtual"],
                                                        "executed": not target_info["virtual"]}))
            self._complete_row(record, rows[-1])
        write_resource_table(bundle, rows, self.kernel_group)
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


def _compile_error_reason(error: Any) -> str | None:
    """What a Triton CompilationError says went wrong (the line its text puts after the location and
    the source excerpt), from it or the CompilationError of a called @triton.jit helper it was raised
    from; None when none says (the reason is then MLIR's diagnostic)."""
    current = error
    while current is not None:
        said = (getattr(current, "error_message", None) or "").strip()
        if said:
            return said.splitlines()[0]
        current = current.__cause__ or current.__context__
    return None


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
