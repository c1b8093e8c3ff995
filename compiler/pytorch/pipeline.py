"""PyTorch: `torch.compile(model)(*example_inputs)` exactly as the user's code would run it, with
every stage captured from PyTorch's own structured trace (TORCH_TRACE).

The source defines `model` (an nn.Module or a function) and `example_inputs` (a tuple, or a
function returning one), or follows KernelBench's convention (`Model`, `get_inputs`,
`get_init_inputs`): compiler/pytorch/entry_points.py. Grad mode, dtypes and module mode are left as
the source leaves them. A source that defines neither is a program that calls torch.compile
itself: it runs as written, and every compile it makes is captured the same way (`_run_program`).

A job either compiles and runs (then measures eager against compiled) or compiles only, on fake
tensors (compiler/kernels/compile_only.py): the `run` option, by default chosen from what the
inputs and parameters need against the worker's memory, and always on a virtual GPU
(compiler/pytorch/gpu_codegen.py). The `run_mode` timing says which and why.
"""
from __future__ import annotations

import contextlib
import json
import os
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from compiler import python_ast
from compiler.errors import ErrorKind
from compiler.kernels import compile_only, fake_modules
from compiler.kernels.capture import KernelCapture
from compiler.kernels.value_reads import is_value_read
from compiler.kernels.virtual_checks import VirtualChecks
from compiler.model import Request
from compiler.pipeline import Bundle, JobContext, LogReader, Option, OptionError, Pipeline, UserError, lacks_release
from compiler.pytorch import (
    artifact_logs,
    collectives,
    compile_index,
    entry_points,
    estimates,
    export,
    gpu_codegen,
    measure,
    peak_memory,
    spare_warmup,
    toolchain_cache,
    trace_stages,
    virtual_program,
    virtual_world,
)
from compiler.pytorch import trace as torch_trace
from compiler.pytorch.trace_stages import PROVENANCE_NOTE, TraceStages, compile_timings
from compiler.pytorch.trace_stream import StageStream, TraceTail
from compiler.targets import DEFAULT_VIRTUAL_TARGET, TARGETS, GpuTarget, virtual_gpu
from compiler.user_code import (
    CappedText,
    captured_stdout,
    is_out_of_memory,
    run_as_main,
    run_source,
    top_level_names,
    user_error,
    write_user_file,
)

USER_FILE = "model.py"

EXAMPLE = '''import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        h = self.norm(x)
        h = torch.nn.functional.gelu(self.fc1(h))
        return x + self.fc2(h)


model = Block()
example_inputs = (torch.randn(8, 64),)
'''


def _validate_inductor_config(value: dict[str, Any]) -> dict[str, Any]:
    # Keys are checked against torch._inductor.config in the worker (the web process has no torch);
    # here only the shape: a dotted name, and a value Python reads back from its repr (the
    # reproducer writes `inductor_config.<key> = <repr>`; NaN and infinities are not literals).
    for key, item in value.items():
        if not isinstance(key, str) or not all(part.isidentifier() for part in key.split(".")):
            raise OptionError(f"inductor_config key {key!r} is not a config name")
        try:
            same = python_ast.literal_eval(repr(item)) == item
        except (ValueError, SyntaxError):
            same = False
        if not same:
            raise OptionError(f"inductor_config value of {key!r} must be true, false, null, a finite number, "
                              f"a string, or a list or object of those, not {item!r}")
    return value


class PyTorchPipeline(Pipeline):
    key = "pytorch"
    title = "PyTorch (torch.compile)"
    accepts = ("Python defining `model` (an `nn.Module` or a function) and `example_inputs` (a tuple, or a "
               "function returning one), or KernelBench's `Model`, `get_inputs()` and `get_init_inputs()`; or a "
               "program that calls torch.compile itself, run as written with every compile captured")
    editor_mode = "python"
    example = EXAMPLE
    toolchain_packages = ("torch", "triton")
    requires = ("torch",)

    def toolchain_refusal(self, options: dict[str, Any], versions: dict[str, str]) -> str | None:
        """The host target runs on any torch; a GPU target is the virtual GPU shim's, pinned to its
        torch and Triton (compiler/targets/virtual_gpu.py)."""
        from compiler.targets import virtual_gpu
        why = super().toolchain_refusal(options, versions)
        if why is None and options.get("target", "host") != "host":
            feature = f"the virtual GPU target {options['target']}"
            why = lacks_release(versions, "torch", (virtual_gpu.TORCH_VERSION,), feature) or \
                lacks_release(versions, "triton", (virtual_gpu.TRITON_VERSION,), feature)
        return why
    warmup_source = toolchain_cache.WARMUP_SOURCE
    prewarm_modules = ("torch", "torch._dynamo", "torch._inductor.compile_fx")
    # A plain spare (warmed up on the host) and one that installed the default virtual GPU first
    # and warmed up on it (compiler/pytorch/spare_warmup.py), for the GPU target people iterate on;
    # the other CUDA targets' spares start when a job for one arrives (spare_kind).
    spare_kinds = ("", DEFAULT_VIRTUAL_TARGET)
    # All fork their jobs from a template (the virtual GPU's warm-up runs no autograd: see
    # spare_warmup._compile_once).
    template_kinds = ("",) + tuple(name for name, target in TARGETS.items() if target.is_cuda)
    # On a fresh install the host template's warm-up builds the toolchain cache (its probes, its
    # header and the virtual CUDA device's library), and the jobs that waited for it fork warm.
    builds_toolchain_in_template = True
    log_readers = (LogReader("torch_trace", "a TORCH_TRACE directory", "compiler.pytorch.imported"),)
    options = (
        Option("backend", "choice", "inductor", "torch.compile backend.", choices=("inductor", "aot_eager", "eager")),
        Option("mode", "choice", "default", "torch.compile mode.",
               choices=("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")),
        Option("dynamic", "choice", "auto", "Dynamic shapes: true, false, or auto (PyTorch's default: None).",
               choices=("auto", True, False)),
        Option("fullgraph", "bool", False, "Fail on the first graph break instead of splitting the graph."),
        Option("training", "bool", False, "Also run backward (loss = sum of the outputs), so AOTAutograd "
                                          "builds and Inductor compiles the backward graph."),
        Option("target", "choice", "host", "host: run as written (CPU tensors stay on the CPU). cuda:sm_*: on a "
                                           "worker with a CUDA device, move model and inputs there and run; on "
                                           "one without, generate Inductor's GPU code for a virtual device of "
                                           "that architecture and compile every Triton kernel to PTX and SASS "
                                           "(nothing runs, no timings).",
               choices=("host", "cuda:sm_80", "cuda:sm_90", "cuda:sm_100")),
        Option("run", "choice", "auto", "compile-and-run: compile, then run and time eager against compiled. "
                                        "compile-only: build the inputs and parameters as fake tensors (no "
                                        "memory), compile every stage as for real ones, run nothing (Inductor's "
                                        "estimates instead of timings). auto: compile-and-run when the inputs and "
                                        "parameters fit the worker's memory (setting run_memory_percent), "
                                        "compile-only otherwise, and always on a virtual GPU.",
               choices=("auto", "compile-only", "compile-and-run")),
        Option("devices", "int", 1, "World size: with N > 1 the source runs as rank 0 of N ranks, as torchrun would "
                                    "start it, on PyTorch's fake process group (init_device_mesh, DTensor, "
                                    "parallelize_module, fully_shard and the collectives work as pasted); rank 0's "
                                    "program is compiled with its collectives, compile-only (nothing is timed).",
               minimum=1, maximum=virtual_world.MAX_DEVICES),
        Option("interconnect", "choice", "auto", "The link the collectives' estimated times assume (devices > 1): "
                                                 "auto is the target GPU's NVLink (InfiniBand NDR on the host).",
               choices=("auto", *collectives.INTERCONNECTS)),
        Option("link_bandwidth_gbs", "int", 0, "The interconnect's bandwidth per GPU, one way, in GB/s (0: the "
                                               "interconnect's own).", minimum=0, maximum=100000),
        Option("link_latency_ns", "int", 0, "The interconnect's latency per ring step, in ns (0: the "
                                            "interconnect's own).", minimum=0, maximum=10_000_000),
        Option("cpp_wrapper", "bool", False, "Generate a C++ wrapper instead of Python (inductor cpp_wrapper)."),
        Option("export", "bool", False, "Take the export path instead: torch.export.export, then AOTInductor "
                                        "(aoti_compile_and_package) into a .pt2 package, loaded and timed."),
        Option("inductor_config", "dict", {}, "torch._inductor.config overrides, e.g. {\"max_autotune\": true}; "
                                              "an unknown key is an error.",
               validate_value=_validate_inductor_config),
    )

    def environment(self, request: Request, workdir: str) -> dict[str, str]:
        # TORCH_TRACE is read when torch is imported, so it is set before run() imports torch.
        return {
            "TORCH_TRACE": _trace_dir(workdir),
            "TORCHINDUCTOR_CACHE_DIR": _inductor_cache_dir(workdir),
            "TRITON_CACHE_DIR": os.path.join(workdir, "triton-cache"),
            # One compile process: no pool to start in the sandbox, same generated code.
            "TORCHINDUCTOR_COMPILE_THREADS": "1",
        }

    def spare_kind(self, request: Request) -> str | None:
        # The plain spare's warm-up compiled for the host. A GPU target installs its (virtual)
        # device before anything is compiled, so it gets a spare that installed that device before
        # its warm-up (compiled on it), or a worker whose process compiled nothing yet.
        target = request.options["target"]
        if target == "host":
            return ""
        return target if TARGETS[target].is_cuda else None

    def uses_toolchain_cache(self, request: Request) -> bool:
        # the CPU probes and the precompiled header serve C++ kernels: the host target's
        return request.options["target"] == "host"

    def prepare_spare(self, workdir: str, toolchain_cache: str, kind: str = "",
                      job_arrived: Callable[[], bool] = lambda: False, export_toolchain_cache: str = "") -> None:
        spare_warmup.warm(workdir, toolchain_cache, gpu_target=kind or None, job_arrived=job_arrived,
                          export=export_toolchain_cache)

    def finish_spare(self, workdir: str, toolchain_cache: str) -> None:
        if spare_warmup.cut_short():
            spare_warmup.warm_up_compile(workdir, toolchain_cache)

    def template_carried_dirs(self) -> list[str]:
        # the precompiled header of the C++ kernels' prelude (or its links into the toolchain cache)
        import torch._inductor.codecache
        return [torch._inductor.codecache._HEADER_DIR]

    def run(self, request: Request, ctx: JobContext) -> None:
        options, bundle = request.options, ctx.bundle
        path = _write_source(request, ctx)
        toolchain = _Toolchain.before_torch(ctx, options["target"])
        torch, baseline_rss = toolchain.import_torch(ctx)
        logs, scheduler_estimates = _configure_inductor(options, torch)
        _log_call_stacks(torch)
        if entry_points.is_script(request.source):
            _run_program(options, ctx, path, toolchain, torch, logs, scheduler_estimates)
            return
        _refuse_export_with_training(options)
        gpu = _gpu_target(options, toolchain, bundle, torch)
        # A world of `devices` ranks: the default process group initialised as torchrun would, and
        # the source's meshes recorded, while the source and the convention's functions run.
        world = virtual_world.start(options["devices"], torch) if options["devices"] > 1 else None
        built = _run_source_and_build(options, ctx, path, world, gpu, torch)
        _refuse_what_the_run_mode_cannot_do(options, built.run_mode)
        built.model, built.inputs = _on_target_device(built, options["target"], gpu, torch)
        compiled = _compiled_model(options, built, torch, bundle)
        capture = _Capture.start(options, ctx, path, world, gpu, built.run_mode, torch, logs, scheduler_estimates)
        call = _first_call(capture, built, compiled, options, ctx, path, torch)
        entries = capture.finish(built.printed, built.model, options, torch)
        _record_compile_timings(bundle, entries, toolchain, _first_call_phases(built.run_source_s, call))
        if call.error is not None:
            raise call.error
        if ctx.export_toolchain_cache:  # the trusted warm-up job only
            toolchain.export(ctx.export_toolchain_cache)
            return
        if built.run_mode.compile_only:
            return  # nothing ran: no run times, only Inductor's estimates (above)
        # Every stage is in the bundle (and so reaches the page) before the measurement starts; from
        # here on the job compiled, and whatever stops the measurement leaves it done.
        bundle.compiled()
        bundle.progress("timing eager and compiled calls")
        call.outputs = None  # the compiling call's outputs: the measurement keeps its own
        _measure(bundle, built.model, call.compiled, built.inputs, options["training"], built.run_mode, path, ctx,
                 torch, baseline_rss, compile_index.profiler_names(entries, (path, USER_FILE)))


# The phases of PyTorchPipeline.run, in the order it runs them.

# What a program that calls torch.compile itself is told it got (the `run_mode` timing).
PROGRAM_SENTENCE = ("your program ran as written, as `python model.py` runs it (its main() guard taken, no "
                    "command-line arguments): every torch.compile it made is captured; irscope called, built "
                    "and timed nothing of its own, so the timings are the compiler's")
# Options that set irscope's own torch.compile call or run: a program makes its own calls.
_OWN_CALL_OPTIONS = ("backend", "mode", "dynamic", "fullgraph", "training", "export", "run")


def _run_program(options: dict[str, Any], ctx: JobContext, path: str, toolchain: _Toolchain, torch: Any,
                 logs: Any, scheduler_estimates: Any) -> None:
    """A program that calls torch.compile itself (entry_points.is_script: a tutorial, a training
    loop, a bug report): run as `python model.py` runs it (user_code.run_as_main), every compile
    it makes written from PyTorch's trace by the same TraceStages as the conventions' compile:
    each frame's Dynamo, AOTAutograd and Inductor stages by compile id, kernels, graph breaks,
    recompiles and their guards. Its error, if it fails, comes after every stage it reached. On a
    virtual GPU or in a virtual world it runs compile-only (_run_program_virtually)."""
    _refuse_what_a_program_sets_itself(options, torch)
    bundle = ctx.bundle
    gpu = _gpu_target(options, toolchain, bundle, torch)
    if gpu is not None or options["devices"] > 1:
        _run_program_virtually(options, ctx, path, toolchain, gpu, torch, logs, scheduler_estimates)
        return
    bundle.timing("run_mode", {"mode": "program", "sentence": PROGRAM_SENTENCE, "requested": options["run"]})
    sink = CappedText(ctx.settings.output_bytes)
    stream = _follow_trace(ctx, path, PROVENANCE_NOTE, torch)
    bundle.progress("running your program; every torch.compile it calls is captured")
    started = time.perf_counter()
    _, error = run_as_main(path, sink, lambda e: user_error(e, path, ctx.settings, _error_kind(e)))
    seconds = time.perf_counter() - started
    entries, _ = _finish_trace(bundle, stream, sink.getvalue(), logs, scheduler_estimates)
    stream.stages.write_host_kernel_table()  # every compile's kernels, as the conventions' job has
    _record_compile_timings(bundle, entries, toolchain, {"program_s": seconds})
    _end_program(bundle, entries, error, path)


def _end_program(bundle: Bundle, entries: list[torch_trace.TraceEntry], error: UserError | None, path: str) -> None:
    if error is not None:
        raise error
    if not torch_trace.compile_ids(entries):
        with open(path, encoding="utf-8") as f:
            names = top_level_names(f.read()) or set()
        hint = (" (it binds `model` but no `example_inputs`: define `example_inputs` too and irscope compiles "
                "`model` on them)") if "model" in names else ""
        raise UserError(ErrorKind.InputError, "the program ran to its end and compiled nothing: it called no function "
                                              "that torch.compile wrapped, and it defines neither `model` and "
                                              "`example_inputs` nor KernelBench's `Model`, `get_inputs` and "
                                              "`get_init_inputs` for irscope to compile" + hint)
    bundle.compiled()


# What a program run on a virtual GPU or in a virtual world is told it got (the `run_mode` timing).
VIRTUAL_PROGRAM_SENTENCE = ("compile-only: your program ran as written (its main() guard taken, no command-line "
                            "arguments) on fake tensors{where}: every torch.compile it made was compiled exactly as "
                            "asked and captured; nothing ran, so nothing is timed (notices say what a value-less "
                            "run could not do)")


def _run_program_virtually(options: dict[str, Any], ctx: JobContext, path: str, toolchain: _Toolchain,
                           gpu: GpuTarget | None, torch: Any, logs: Any, scheduler_estimates: Any) -> None:
    """A program on a virtual GPU or as rank 0 of a virtual world (compiler/pytorch/virtual_program.py):
    run as written under the compile-only fake mode, its Inductor compiles compile-only, with the
    world's and the virtual GPU's capture (collectives, kernels); what it could not do without
    values (timing, comparisons, reading a value) is a notice at its line, the last one ending
    the program with the job done."""
    bundle = ctx.bundle
    where = "".join([f" on a virtual {gpu.name}" if gpu is not None else "",
                     f" as rank 0 of a virtual world of {options['devices']} ranks (option devices)"
                     if options["devices"] > 1 else ""])
    run_mode = entry_points.RunMode(entry_points.COMPILE_ONLY, VIRTUAL_PROGRAM_SENTENCE.format(where=where),
                                    options["run"], None, None, ctx.settings.run_memory_percent)
    bundle.timing("run_mode", dict(run_mode.to_json(), program=True))
    world = virtual_world.start(options["devices"], torch) if options["devices"] > 1 else None
    capture = _Capture.start(options, ctx, path, world, gpu, run_mode, torch, logs, scheduler_estimates)
    checks, modules = VirtualChecks(path), []
    mode = compile_only.fake_mode()
    bundle.progress("running your program on fake tensors; every torch.compile it calls is captured")
    started = time.perf_counter()

    def explain(e: BaseException) -> UserError:
        return _program_error(e, path, ctx, run_mode)

    phases: dict[str, float] = {}
    with _in_world(world, path), fake_modules.convertible(), \
            virtual_program.installed(checks, modules, torch, gpu is not None), capture.installed(mode):
        _, error = run_as_main(path, capture.sink, explain)
        phases["program_s"] = time.perf_counter() - started
        if error is not None and checks.stopped(error.__cause__ or error, path):
            error = None
        if capture.order is not None and error is None:
            phases["later_kernel_configs_s"] = gpu_codegen.compile_other_configs(
                capture.order, capture.kernel_capture, ctx.workdir, ctx.settings.job_cpus)
    finishing = time.perf_counter()
    entries = capture.finish("", modules[-1] if modules else None, options, torch)
    checks.add_stage(bundle)
    phases["final_stages_s"] = time.perf_counter() - finishing
    _record_compile_timings(bundle, entries, toolchain, phases)
    _end_program(bundle, entries, error, path)


def _program_error(exc: BaseException, path: str, ctx: JobContext, run_mode: entry_points.RunMode) -> UserError:
    """A virtual program's error, its cause kept (a value read ends the program, not the job);
    a library's message to its own developers gets a sentence saying what happened."""
    error = _compile_error(exc, path, ctx, run_mode)
    if "please file an issue" in error.error.message.lower() and error.error.kind != ErrorKind.InternalError:
        error = _explained(error, f"irscope: {run_mode.sentence.split(':')[0]} run, your program's tensors are fake "
                                  "(shapes and dtypes, no values); the library met one where it expected a real "
                                  "tensor, which is not a bug to report to it")
    error.__cause__ = exc
    return error


def _refuse_what_a_program_sets_itself(options: dict[str, Any], torch: Any) -> None:
    """A program makes its own torch.compile calls: the options of irscope's call are refused (not
    silently ignored)."""
    defaults = {o.name: o.default for o in PyTorchPipeline.options}
    changed = [name for name in _OWN_CALL_OPTIONS if options[name] != defaults[name]]
    if changed:
        raise UserError(ErrorKind.OptionError, f"{', '.join(changed)}: your program calls torch.compile itself, so "
                        "the arguments of its own calls apply; set them there (these options set the call irscope "
                        "makes for a source that defines `model` and `example_inputs`)")


def _write_source(request: Request, ctx: JobContext) -> str:
    """The `source` stage (each line mapped to itself) and the user's file the job runs; its path."""
    ctx.bundle.add("source", "Source", "Source", "python", request.source,
                   source_map=[[n, n] for n in range(1, request.source.count("\n") + 2)])
    return write_user_file(request.source, USER_FILE, ctx.workdir)


@dataclass
class _Toolchain:
    """What the job takes from the toolchain cache and what it builds beside torch's import (the
    virtual CUDA device's C++ half, the CPU probes), for the compile timings and, in the trusted
    warm-up job, the toolchain cache it exports."""

    cache_dir: str  # the job's Inductor cache
    probes: int  # ISA probes seeded from the toolchain cache
    imported_probes: set[str]
    preinstalled: GpuTarget | None  # the virtual GPU this spare installed before its warm-up
    runtime: virtual_gpu.RuntimeBuild | None  # the virtual device's C++ half, for this job
    shim: virtual_gpu.RuntimeBuild | None  # the same, built into the exported toolchain cache
    import_s: float = 0.0
    header_dir: str = ""
    headers: list[str] = field(default_factory=list)  # precompiled headers linked from the cache
    isa_probes: dict[str, object] | None = None  # the warm-up job's probes, run in parallel

    @classmethod
    def before_torch(cls, ctx: JobContext, target: str) -> _Toolchain:
        """Seed the job's Inductor cache and start the builds that need torch's headers, not torch."""
        cache_dir = _inductor_cache_dir(ctx.workdir)
        probes = toolchain_cache.import_probes(ctx.toolchain_cache, cache_dir)
        imported_probes = set(toolchain_cache.probe_libraries(cache_dir))
        # A GPU target on a worker without that GPU needs the virtual device's C++ half: g++ builds it
        # from torch's headers while torch is imported (left unused when the worker has the GPU),
        # unless this worker is a spare that installed the device before its warm-up.
        preinstalled = gpu_codegen.installed()
        runtime = virtual_gpu.runtime_for_job(ctx.toolchain_cache, ctx.workdir) \
            if target != "host" and preinstalled is None else None
        # The trusted warm-up job builds that C++ half once, into the toolchain cache it exports:
        # started now, so g++ runs beside the import and the warm-up compile, not after them.
        shim = virtual_gpu.RuntimeBuild(os.path.join(ctx.export_toolchain_cache, virtual_gpu.RUNTIME_CACHE_DIR)) \
            if ctx.export_toolchain_cache else None
        return cls(cache_dir, probes, imported_probes, preinstalled, runtime, shim)

    def import_torch(self, ctx: JobContext) -> tuple[Any, int | None]:
        """Import torch (timed), then link the cache's precompiled headers where Inductor looks.
        Returns torch and the process's resident memory before the model exists."""
        ctx.bundle.progress("importing torch")
        started = time.perf_counter()
        import torch
        import torch._inductor.codecache
        import torch._inductor.config  # set by _configure_inductor
        self.import_s = time.perf_counter() - started
        baseline_rss = peak_memory.process_resident_bytes()  # before the model exists
        self.header_dir = torch._inductor.codecache._HEADER_DIR
        self.headers = toolchain_cache.link_headers(ctx.toolchain_cache, self.header_dir)
        # the trusted warm-up job: the CPU probes, in parallel (a job meets them at its first compile)
        self.isa_probes = toolchain_cache.probe_isas(built=self.probes > 0) if ctx.export_toolchain_cache else None
        return torch, baseline_rss

    def timings(self) -> dict[str, Any]:
        """The compile timings' account of the toolchain: what came from the cache, what the job built."""
        timings: dict[str, Any] = {
            "isa_probes_from_toolchain_cache": self.probes,
            "isa_probes_built_in_job": [name for name in toolchain_cache.probe_libraries(self.cache_dir)
                                        if name not in self.imported_probes],
            "vector_isa": toolchain_cache.isas_found(),
        }
        if self.isa_probes is not None:
            timings["isa_probes_in_parallel"] = self.isa_probes
        timings["precompiled_headers_from_toolchain_cache"] = len(self.headers)
        timings["precompiled_headers_built_in_job"] = toolchain_cache.headers_built(self.header_dir)
        return timings

    def export(self, dest: str) -> None:
        """The trusted warm-up job's: the probes and precompiled headers into the toolchain cache."""
        toolchain_cache.export(self.cache_dir, self.header_dir, dest)
        self.shim.wait()  # the virtual CUDA device's C++ half: irscope's own source against this torch


def _configure_inductor(options: dict[str, Any], torch: Any) -> tuple[Any, Any]:
    """torch._inductor.config as the options say, and the logs read after the compile installed:
    returns Inductor's artifact logs and the scheduler's estimates."""
    inductor_config = torch._inductor.config
    # Provenance tracking links each kernel to the user's lines; it only adds
    # "# [Provenance debug handles]" comments to the wrapper (disclosed on the stage).
    inductor_config.trace.provenance_tracking_level = 1
    logs = artifact_logs.install(torch, (estimates.ARTIFACT,))
    scheduler_estimates = estimates.install(torch)
    inductor_config.cpp_wrapper = options["cpp_wrapper"]
    for key, value in options["inductor_config"].items():
        _set_config(inductor_config, key, value)
    return logs, scheduler_estimates


def _call_stack(args: Any = None) -> None:
    """Dynamo's start-of-compile callback: the real Python stack, logged to the trace as an artifact of
    the compile (compile_index.CALL_STACK_ARTIFACT). dynamo_start's own stack misses the frame that
    called a `@torch.compile`d function, the line the Compiles index groups the compile under."""
    import torch
    trigger = getattr(getattr(args, "callback_trigger", None), "name", "DYNAMO")
    if trigger != "DYNAMO":  # a lazily compiled backward, run by autograd: not a call of the program's
        return
    frames = [{"filename": f.filename, "line": f.lineno, "name": f.name, "loc": f.line or ""}
              for f in traceback.extract_stack()[:-1]]
    torch._logging.trace_structured(
        "artifact", metadata_fn=lambda: {"name": compile_index.CALL_STACK_ARTIFACT, "encoding": "json"},
        payload_fn=lambda: json.dumps(frames))


def _log_call_stacks(torch: Any) -> None:
    """Log each compile's call stack (_call_stack), once per process, where this torch has the hook."""
    handler = getattr(torch._dynamo, "callback_handler", None)
    if handler is not None and _call_stack not in getattr(handler, "start_callbacks", [_call_stack]):
        handler.register_start_callback(_call_stack)


def _refuse_export_with_training(options: dict[str, Any]) -> None:
    if options["export"] and options["training"]:
        raise UserError(ErrorKind.OptionError, "export and training do not combine: torch.export captures "
                                               "inference graphs for AOTInductor")


def _gpu_target(options: dict[str, Any], toolchain: _Toolchain, bundle: Bundle, torch: Any) -> GpuTarget | None:
    """The virtual GPU, installed, when the target is a GPU this worker does not have; None for the
    host or a GPU it has (said in the `target` timing)."""
    if options["target"] == "host":
        return None
    if toolchain.preinstalled is None and torch.cuda.is_available():
        bundle.timing("target", {"name": torch.cuda.get_device_name(), "requested": options["target"],
                                 "capability": "sm_%d%d" % torch.cuda.get_device_capability(),
                                 "virtual": False, "executed": True})
        return None
    gpu = gpu_codegen.virtual_target(options["target"], options)
    gpu_codegen.install(gpu, toolchain.runtime, bundle)
    return gpu


@dataclass
class _Built:
    """The model and inputs the job compiles, as the run mode built them."""

    run_mode: entry_points.RunMode
    model: Any
    inputs: tuple
    printed: str  # what the source and the convention's functions printed
    fake_mode: Any  # the FakeTensorMode they were sized in (compile-only: built and compiled in)
    run_source_s: float


def _in_world(world: virtual_world.World | None, path: str) -> contextlib.AbstractContextManager[Any]:
    return virtual_world.source_patches(world, path) if world is not None else contextlib.nullcontext()


def _run_source_and_build(options: dict[str, Any], ctx: JobContext, path: str, world: virtual_world.World | None,
                          gpu: GpuTarget | None, torch: Any) -> _Built:
    """Run the user's file, find its model and inputs (compiler/pytorch/entry_points.py) and build
    them as the run mode needs (_build); the `run_mode` timing says which mode and why."""
    ctx.bundle.progress("running your source")
    started = time.perf_counter()
    mode = compile_only.fake_mode()
    try:
        # Rank 0 of a world is compiled, never run: its source runs on fake tensors, so a model
        # sized for a cluster is built and sharded without its memory (and on a virtual GPU).
        with _in_world(world, path), mode if world is not None else contextlib.nullcontext():
            namespace, printed = run_source(ctx, path)
    except UserError as e:
        raise _explained(virtual_world.explained(e, options["devices"]), _VALUE_TOO_BIG) from None
    program = entry_points.find(namespace, torch)
    try:
        with _in_world(world, path):
            run_mode, model, inputs, built_output = _build(program, options, ctx, mode, gpu, path, torch)
    except UserError as e:
        raise virtual_world.explained(e, options["devices"]) from None
    run_source_s = time.perf_counter() - started
    ctx.bundle.timing("run_mode", run_mode.to_json())
    return _Built(run_mode, model, inputs, printed + built_output, mode, run_source_s)


def _refuse_what_the_run_mode_cannot_do(options: dict[str, Any], run_mode: entry_points.RunMode) -> None:
    if run_mode.compile_only and options["export"]:
        raise UserError(ErrorKind.OptionError, "export: AOTInductor packages the weights' values and loads the "
                                               f"package to run it; this job is {run_mode.sentence}, so use "
                                               "export=false")
    if run_mode.compile_only and str(options["mode"]).startswith("max-autotune"):
        raise UserError(ErrorKind.OptionError, "max-autotune benchmarks candidate kernels on real tensors of these "
                                               f"shapes; this job is {run_mode.sentence}, so use mode=default")


def _on_target_device(built: _Built, target: str, gpu: GpuTarget | None, torch: Any) -> tuple[Any, tuple]:
    """The model and inputs on the target's device: a real GPU's (fake copies there when the job
    is compile-only), or the virtual GPU's; on the host, as built."""
    if target == "host":
        return built.model, built.inputs
    if gpu is None and not built.run_mode.compile_only:
        return _to_cuda(built.model, built.inputs, torch)
    with built.fake_mode:
        return compile_only.to_device(built.model, built.inputs, "cuda")


def _compiled_model(options: dict[str, Any], built: _Built, torch: Any, bundle: Bundle) -> Any:
    """torch.compile of the model with the options (None on the export path: the first call
    exports it); compile-only, Inductor's own backend compiling for fake inputs."""
    compile_mode = None if options["mode"] == "default" else options["mode"]
    dynamic = None if options["dynamic"] == "auto" else options["dynamic"]
    backend: Any = options["backend"]
    if built.run_mode.compile_only and backend == "inductor":
        backend, compile_mode = compile_only.inductor_backend(compile_mode, None, dynamic), None
    compiled = None if options["export"] else torch.compile(
        built.model, backend=backend, mode=compile_mode, dynamic=dynamic, fullgraph=options["fullgraph"])
    bundle.progress("compiling (Dynamo, AOTAutograd, Inductor)" + (" on fake tensors" if built.run_mode.compile_only
                                                                     else ""))
    return compiled


def _follow_trace(ctx: JobContext, path: str, output_code_note: str, torch: Any) -> StageStream:
    """Start writing stages from PyTorch's trace as it grows, while the user's code compiles (its
    own compiles included: the trace is read from its start)."""
    stages = TraceStages(ctx.bundle, (path, USER_FILE), output_code_note=output_code_note)
    stream = StageStream(stages, TraceTail(_trace_dir(ctx.workdir), torch), ctx.bundle.progress)
    stream.start()
    return stream


def _finish_trace(bundle: Bundle, stream: StageStream, printed: str, logs: Any,
                  scheduler_estimates: Any) -> tuple[list[torch_trace.TraceEntry], list[estimates.GraphEstimates]]:
    """Stop following the trace; write the program's output, the trace's last stages and
    Inductor's estimates. Returns the trace's entries and the estimates."""
    stream.stop()
    bundle.add("run.stdout", "Program output", "Run", "text", printed)
    entries = stream.finish(artifact_logs.texts(logs))
    graph_estimates = estimates.graphs(scheduler_estimates)
    _write_estimates(bundle, graph_estimates, torch_trace.compile_ids(entries))
    return entries, graph_estimates


@dataclass
class _Capture:
    """What records the compile while the first call runs: the program's output, the trace's
    stages (written as the trace grows), Inductor's logs, and where they apply the world's
    collectives and the virtual GPU's kernels (each kernel's first config as the module loads, the
    others once every graph compiled)."""

    bundle: Bundle
    sink: CappedText
    stream: StageStream
    logs: Any
    scheduler_estimates: Any
    world: virtual_world.World | None
    recorder: collectives.Recorder | None
    kernels: gpu_codegen.KernelStages | None
    order: Any
    kernel_capture: KernelCapture | None

    @classmethod
    def start(cls, options: dict[str, Any], ctx: JobContext, path: str, world: virtual_world.World | None,
              gpu: GpuTarget | None, run_mode: entry_points.RunMode, torch: Any, logs: Any,
              scheduler_estimates: Any) -> _Capture:
        bundle = ctx.bundle
        sink = CappedText(ctx.settings.output_bytes)
        recorder = collectives.Recorder(torch, path, world.meshes) if world is not None else None
        if recorder is not None:  # read-only passes on Inductor's own hooks: the compiled code is the same
            inductor_config = torch._inductor.config
            inductor_config.post_grad_custom_pre_pass, inductor_config.post_grad_custom_post_pass = recorder.passes()
        kernels = gpu_codegen.KernelStages(bundle, ctx.workdir, gpu, gpu_codegen.job_processes(ctx.settings.job_cpus)) \
            if gpu is not None else None
        order = gpu_codegen.config_order(bundle) if gpu is not None and not options["export"] else None
        kernel_capture = KernelCapture(os.path.join(ctx.workdir, "mlir-passes"), ctx.settings.pass_dump_bytes,
                                       on_compiled=kernels.write) if kernels is not None else None
        stream = _follow_trace(ctx, path, " ".join(_output_code_notes(run_mode, world, gpu) + [PROVENANCE_NOTE]),
                               torch)
        return cls(bundle, sink, stream, logs, scheduler_estimates, world, recorder, kernels, order, kernel_capture)

    @contextlib.contextmanager
    def installed(self, fake_mode: Any) -> Iterator[None]:
        """Around the first call: its output captured, the fake mode (compile-only), the kernels'
        capture and config order, the world's eager collectives recorded."""
        with captured_stdout(self.sink), fake_mode if fake_mode is not None else contextlib.nullcontext(), \
                self.kernel_capture.installed() if self.kernel_capture is not None else contextlib.nullcontext(), \
                self.recorder.eager_installed() if self.recorder is not None else contextlib.nullcontext(), \
                self.order.installed() if self.order is not None else contextlib.nullcontext():
            yield

    def finish(self, printed: str, model: Any, options: dict[str, Any], torch: Any) -> list[torch_trace.TraceEntry]:
        """Stop following the trace and write what needs the whole compile: the program's output
        (`printed` before the capture, then the capture's), the trace's last stages, Inductor's
        estimates, the world's stages (`model`'s placements), the kernels' stages."""
        entries, graph_estimates = _finish_trace(self.bundle, self.stream, printed + self.sink.getvalue(),
                                                 self.logs, self.scheduler_estimates)
        if self.world is not None and self.recorder is not None:
            _write_world(self.bundle, self.world, self.recorder, model, entries, graph_estimates, options, torch)
        if self.kernels is not None:
            # the rows' user lines, from the output codes; their bytes, from Inductor's estimates
            self.kernels.finish(self.stream.stages.kernel_lines, estimates.kernel_bytes(graph_estimates))
        else:
            self.stream.stages.write_host_kernel_table()
        return entries


def _output_code_notes(run_mode: entry_points.RunMode, world: virtual_world.World | None,
                       gpu: GpuTarget | None) -> list[str]:
    """What the output code stages say of how this job differs from a plain compile-and-run."""
    notes = [compile_only.NOTE] if run_mode.compile_only else []
    if world is not None:
        notes.append(virtual_world.NOTE.format(n=world.size))
    if gpu is not None:
        notes.append(gpu_codegen.fidelity_note())
    return notes


@dataclass
class _FirstCall:
    """The compiling call: what it compiled and returned, or its error; how long it took."""

    compiled: Any
    outputs: Any
    error: UserError | None
    later_s: float | None  # the virtual GPU's other kernel configs, compiled after every graph
    started: float
    seconds: float


def _first_call(capture: _Capture, built: _Built, compiled: Any, options: dict[str, Any], ctx: JobContext,
                path: str, torch: Any) -> _FirstCall:
    """The first call of the compiled model (exported first on the export path; backward too when
    training), which compiles it; an error is kept for after the stages are written."""
    outputs, error, later_s = None, None, None
    started = time.perf_counter()
    try:
        with capture.installed(built.fake_mode if built.run_mode.compile_only else None):
            if options["export"]:
                compiled = export.export_and_package(built.model, built.inputs, os.path.dirname(path), ctx.bundle,
                                                     (path, USER_FILE), torch)
            outputs = compiled(*built.inputs)
            if options["training"]:
                ctx.bundle.progress("running backward (compiles the backward graph)")
                measure.loss_of(outputs, torch).backward()
            if capture.order is not None:
                later_s = gpu_codegen.compile_other_configs(capture.order, capture.kernel_capture, ctx.workdir,
                                                            ctx.settings.job_cpus)
    except BaseException as e:  # noqa: BLE001 - compile and user errors are reported, stages kept
        if isinstance(e, KeyboardInterrupt):
            raise
        error = _compile_error(e, path, ctx, built.run_mode)
    return _FirstCall(compiled, outputs, error, later_s, started, time.perf_counter() - started)


def _first_call_phases(run_source_s: float, call: _FirstCall) -> dict[str, float]:
    """irscope's own phases of a convention's compile, in seconds, for the `compile` timing."""
    phases = {"run_source_s": run_source_s, "final_stages_s": time.perf_counter() - call.started - call.seconds,
              "first_call_s": call.seconds}
    if call.later_s is not None:
        phases["later_kernel_configs_s"] = call.later_s
    return phases


def _record_compile_timings(bundle: Bundle, entries: list[torch_trace.TraceEntry], toolchain: _Toolchain,
                            phases: dict[str, float]) -> None:
    """The `compile` timing: PyTorch's compile phases, then irscope's own (torch's import, then
    `phases` in their order), then the toolchain's."""
    timings = compile_timings(entries)
    timings["source"] = ("Dynamo's, AOTAutograd's and Inductor's phases and their total from PyTorch's dynamo_timed "
                         "events in TORCH_TRACE; importing torch, running your source or program, the first call "
                         "and the stages written after it from irscope's own clock")
    timings["import_torch_s"] = round(toolchain.import_s, 3)
    timings.update({name: round(seconds, 3) for name, seconds in phases.items()})
    timings.update(toolchain.timings())
    timings["worker_warm_up"] = spare_warmup.report()
    bundle.timing("compile", timings)


def _measure(bundle: Bundle, model: Any, compiled: Any, inputs: tuple, training: bool,
             run_mode: entry_points.RunMode, path: str, ctx: JobContext, torch: Any, baseline_rss: int | None,
             graph_names: dict[str, str]) -> None:
    """Time eager against compiled calls (compiler/pytorch/measure.py) and record it beside the
    estimated peak; a measurement stopped by the memory limit, the wall clock or the user's code
    is recorded as what was not measured and why (`not_measured`), never as the job's error.
    `graph_names`: the profiler's names of compiled graphs (hashes) -> words, for the profile."""
    deadline = ctx.started + ctx.settings.wall_time_limit_s * 0.9  # the rest: the last stages, the runner
    try:
        run = measure.measure(model, compiled, inputs, training, torch, ctx.settings.measure_s, deadline=deadline,
                              float64_reference=run_mode.float64_reference)
    except BaseException as e:  # noqa: BLE001 - the compile succeeded: the stages stay and the job is done
        if isinstance(e, KeyboardInterrupt):
            raise
        error = user_error(e, path, ctx.settings, ErrorKind.UserCodeError, during="timing eager and compiled calls")
        bundle.timing("not_measured", {"phase": "timing eager and compiled calls", "kind": str(error.error.kind),
                                       "why": error.error.message, "line": error.error.line,
                                       "setting": "memory_limit_mb" if is_out_of_memory(e) else None})
        _record_peak(bundle, run_mode, baseline_rss)
        return
    kernels = {"table": run.pop("kernels"), "events": run.pop("kernel_timeline"), "where": run["where"]}
    profiled = {r["name"] for r in kernels["table"]} | {e["name"] for e in kernels["events"]}
    kernels["labels"] = {name: words for name, words in graph_names.items() if name in profiled}
    if kernels["table"]:
        bundle.add("run.kernels", "Profile of one compiled call", "Timings", "profile", kernels)
    bundle.timing("run", run)
    skipped = run.get("not_measured") or []
    if skipped:
        bundle.timing("not_measured", {"phase": ", ".join(skipped), "kind": "WallTimeLimit",
                                       "why": f"{', '.join(skipped)} would not have finished within the job's "
                                              f"{ctx.settings.wall_time_limit_s} s", "line": None,
                                       "setting": "wall_time_limit_s"})
    _record_peak(bundle, run_mode, baseline_rss)


def _record_peak(bundle: Bundle, run_mode: entry_points.RunMode, baseline_rss: int | None) -> None:
    """The run mode's timing again, with the process's measured peak beside the estimate: its
    resident high-water mark over the job, less what it held before the model was built."""
    measured = peak_memory.process_peak_bytes()
    if measured is None or baseline_rss is None:
        return
    bundle.timing("run_mode", dict(run_mode.to_json(), measured_peak_bytes=measured - baseline_rss,
                                   measured_how="the worker process's resident-memory high-water mark (VmHWM) "
                                                "over the job, less its resident memory after importing torch "
                                                "(before the model was built); the compile's own memory is in it"))


def _build(program: entry_points.Program, options: dict[str, Any], ctx: JobContext, mode: Any, gpu: Any,
           path: str, torch: Any) -> tuple[entry_points.RunMode, Any, tuple, str]:
    """Measure what the model and its inputs need without allocating them (the convention's
    functions called under the fake mode), choose compile-only or compile-and-run (the `run`
    option, the sizes, the worker's memory), and build them that way: fake tensors, or real ones
    (the functions called again, for real). Returns (run mode, model, inputs, what the kept build
    printed)."""
    ctx.bundle.progress("measuring the inputs and parameters (fake tensors)")
    sizing_output = CappedText(ctx.settings.output_bytes)
    try:
        with captured_stdout(sizing_output):
            model, inputs = program.build(mode)
        sizes = entry_points.sizes(model, inputs, torch)
    except UserError:
        raise
    except BaseException as e:  # noqa: BLE001 - the user's functions failed: their line, their error
        if isinstance(e, KeyboardInterrupt):
            raise
        raise _fake_build_error(e, path, ctx) from e
    peak = None
    if gpu is None and options["run"] != entry_points.COMPILE_ONLY and options["devices"] == 1:
        ctx.bundle.progress("estimating the run's peak memory (fake tensors)")
        peak = _estimate_peak(model, inputs, options["training"], mode, torch,
                              timeout_s=min(60.0, ctx.settings.wall_time_limit_s / 10))
    run_mode = entry_points.choose(options["run"], sizes, ctx.settings.memory_limit_mb,
                                   ctx.settings.run_memory_percent, gpu.name if gpu is not None else None, peak,
                                   world_size=options["devices"])
    if run_mode.compile_only:
        with mode:  # a model or inputs given as values were built for real: fake copies of them
            return run_mode, compile_only.to_fake(model, mode), compile_only.to_fake(inputs, mode), \
                sizing_output.getvalue()
    if not (program.builds_model or program.builds_inputs):
        return run_mode, model, inputs, sizing_output.getvalue()
    ctx.bundle.progress("building the inputs and parameters")
    real_output = CappedText(ctx.settings.output_bytes)
    try:
        with captured_stdout(real_output):
            model, inputs = program.build(None)
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, KeyboardInterrupt):
            raise
        raise _explained(user_error(e, path, ctx.settings), _RUN_TOO_BIG) from e
    return run_mode, model, inputs, real_output.getvalue()


def _estimate_peak(model: Any, inputs: tuple, training: bool, mode: Any, torch: Any, timeout_s: float) -> Any:
    """The peak a compile-and-run job would hold (compiler/pytorch/peak_memory.py), replayed in a
    forked child on fake copies of the model and inputs (torch's FakeCopyMode: nothing real is
    copied): nothing the forward does reaches the model the job compiles; what it prints is dropped."""
    import copy

    from torch._subclasses.fake_tensor import FakeCopyMode

    def replay() -> Any:
        with FakeCopyMode(mode):
            fake_model, fake_inputs = copy.deepcopy(model), copy.deepcopy(inputs)
        with captured_stdout(CappedText(0)):
            return peak_memory.estimate(fake_model, fake_inputs, training, mode, torch, measure.loss_of)
    return peak_memory.in_child(replay, timeout_s)


def _fake_build_error(exc: BaseException, path: str, ctx: JobContext) -> UserError:
    error = user_error(exc, path, ctx.settings)
    if is_value_read(exc):
        error = UserError(error.error.kind, error.error.message + " (irscope calls get_inputs/get_init_inputs and "
                          "example_inputs under a FakeTensorMode to learn the inputs' sizes without allocating "
                          "them; a fake tensor has no values to read)", error.error.line)
    return error


def _compile_error(exc: BaseException, path: str, ctx: JobContext, run_mode: entry_points.RunMode) -> UserError:
    """The job's error for an exception from the compile (or the user's code run by it)."""
    error = user_error(exc, path, ctx.settings, _error_kind(exc))
    if run_mode.compile_only and is_value_read(exc):
        return _explained(error, f"{run_mode.sentence}: the inputs are fake tensors, which have no values, so code "
                                 "that reads a tensor's value (a Python branch on it, .item(), .tolist()) cannot run; "
                                 "Dynamo graph-breaks there and the eager code between graphs needs the value")
    if run_mode.compile_only and "Couldn't swap" in str(exc):
        return _explained(error, f"{run_mode.sentence}: the model was built from fake tensors, and PyTorch cannot "
                                 "move or convert a fake module's parameters in place (nn.Module.to swaps them); "
                                 "irscope moves the model to the target itself")
    return error if run_mode.compile_only else _explained(error, _RUN_TOO_BIG)


# What a MemoryLimit adds, by where it happened.
_VALUE_TOO_BIG = ("what the source builds when it runs is allocated for real; make `example_inputs` a function "
                  "(or use KernelBench's get_inputs and get_init_inputs) and irscope sizes the inputs on fake "
                  "tensors first, and compiles without allocating them when they do not fit")
_RUN_TOO_BIG = "with run: compile-only irscope compiles every stage on fake tensors, allocating and running nothing"


def _explained(error: UserError, explanation: str) -> UserError:
    """`error` with `explanation` appended when it is a MemoryLimit (and always for other texts
    passed by the compile-only checks above)."""
    if error.error.kind != ErrorKind.MemoryLimit and explanation in (_VALUE_TOO_BIG, _RUN_TOO_BIG):
        return error
    explained = UserError(error.error.kind, f"{error.error.message} ({explanation})", error.error.line)
    explained.output = error.output
    return explained


def _trace_dir(workdir: str) -> str:
    """TORCH_TRACE: where PyTorch writes the job's structured trace."""
    return os.path.join(workdir, "trace")


def _inductor_cache_dir(workdir: str) -> str:
    """TORCHINDUCTOR_CACHE_DIR: the job's private Inductor cache."""
    return os.path.join(workdir, "inductor-cache")


def _to_cuda(model: Any, inputs: tuple, torch: Any) -> tuple[Any, tuple]:
    """The user's model and inputs on the worker's CUDA device (target: cuda:*, a real GPU)."""
    if isinstance(model, torch.nn.Module):
        model = model.to("cuda")
    return model, tuple(t.to("cuda") if isinstance(t, torch.Tensor) else t for t in inputs)


def _set_config(config: Any, key: str, value: Any) -> None:
    """Set torch._inductor.config's `key` (dotted for nested sections such as triton.cudagraphs)."""
    *sections, name = key.split(".")
    target = config
    for section in sections:
        target = getattr(target, section, None)
        if target is None:
            raise UserError(ErrorKind.OptionError,
                            f"inductor_config: torch._inductor.config has no section {section!r}")
    if not hasattr(target, name):
        raise UserError(ErrorKind.OptionError, f"inductor_config: torch._inductor.config has no {key!r}")
    current = getattr(target, name)
    if current is not None and value is not None and not isinstance(value, type(current)) \
            and not (isinstance(current, float) and isinstance(value, int)):
        raise UserError(ErrorKind.OptionError, f"inductor_config[{key!r}] takes a {type(current).__name__} "
                                               f"(now {current!r}), not {value!r}")
    setattr(target, name, value)


def _error_kind(exc: BaseException) -> ErrorKind:
    module = type(exc).__module__ or ""
    return ErrorKind.CompileError if module.startswith(("torch._dynamo", "torch._inductor", "torch._functorch")) \
        else ErrorKind.UserCodeError


def _write_world(bundle: Bundle, world: virtual_world.World, recorder: collectives.Recorder, model: Any,
                 entries: list[torch_trace.TraceEntry], graphs: list[estimates.GraphEstimates],
                 options: dict[str, Any], torch: Any) -> None:
    """A virtual world's stages: every DTensor parameter's placements on its mesh with the compiled
    graphs' collectives (`distributed.placements`), and the collectives with their estimated cost
    (`distributed.collectives`)."""
    trace_ids = torch_trace.compile_ids(entries)
    for record in recorder.graphs:
        record.compile_id = trace_stages.trace_id(record.compile_id, trace_ids)
    output_codes: dict[str, list[tuple[str, str]]] = {}
    for entry in entries:
        if entry.kind == "inductor_output_code" and entry.compile_id is not None:
            codes = output_codes.setdefault(entry.compile_id, [])
            suffix = trace_stages.output_code_suffix(entry.payload, len(codes))
            codes.append((f"inductor.output_code:{entry.compile_id}{suffix}", entry.payload))
    compute = {(trace_stages.trace_id(g.compile_id, trace_ids), g.backward): g.total_bytes for g in graphs}
    link = collectives.interconnect_for(options["interconnect"], options["target"])
    latency = options["link_latency_ns"] / 1e3 if options["link_latency_ns"] else None
    value = collectives.stage_value(recorder, world.size, link, float(options["link_bandwidth_gbs"]) or None,
                                    latency, options["target"], output_codes, compute)
    mesh = virtual_world.placements(model, world, torch)
    if mesh is not None or value["graphs"]:
        mesh = mesh or {"devices": world.size, "partitioner": "PyTorch DTensor", "arrays": [], "instructions": [],
                        "collectives": [], "from_stage": "the model holds no DTensor parameter or buffer"}
        mesh["collectives"] = collectives.mesh_collectives(value)
        bundle.add("distributed.placements", "Placements on the mesh", "Distributed", "mesh", mesh,
                   meta={"note": virtual_world.NOTE.format(n=world.size)})
    lines = sorted({c["line"] for g in value["graphs"] for c in g["collectives"] if c["line"]})
    bundle.add("distributed.collectives", "Collectives and their cost (estimates)", "Distributed", "collectives",
               value, source_map=[[1, n] for n in lines], meta={"estimate": True, "note": collectives.NOTE})


def _write_estimates(bundle: Bundle, graphs: list[estimates.GraphEstimates], trace_ids: list[str]) -> None:
    """`inductor.estimates:<compile id>[.backward]`: Inductor's estimates for each compiled graph."""
    for graph in graphs:
        cid = trace_stages.trace_id(graph.compile_id, trace_ids)
        key = f"inductor.estimates:{cid}" + (".backward" if graph.backward else "")
        n = 1
        while bundle.has(key + (f".{n}" if n > 1 else "")):
            n += 1
        key += f".{n}" if n > 1 else ""
        bundle.add(key, f"Inductor's estimates [{cid}]" + (" backward" if graph.backward else ""), "Inductor",
                   "json", graph.to_json(), meta={"note": estimates.NOTE, "estimate": True})
