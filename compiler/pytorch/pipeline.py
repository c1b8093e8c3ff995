"""PyTorch: `torch.compile(model)(*example_inputs)` exactly as the user's code would run it, with
every stage captured from PyTorch's own structured trace (TORCH_TRACE).

The source defines `model` (an nn.Module or a function) and `example_inputs` (a tuple, or a
function returning one). Grad mode, dtypes and module mode are left as the source leaves them.
"""
from __future__ import annotations

import os
import time
from typing import Any

from compiler.model import Request
from compiler.pipeline import Bundle, JobContext, Option, OptionError, Pipeline, UserError
from compiler.pytorch import artifact_logs, export, measure, toolchain_cache, trace_stages
from compiler.pytorch import source_map as torch_source_map
from compiler.pytorch import trace as torch_trace
from compiler.user_code import CappedText, captured_stdout, run_source, user_error, write_user_file

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

_PROVENANCE_NOTE = ("irscope compiles with torch._inductor.config.trace.provenance_tracking_level = 1 so that "
                    "kernels link to your lines; it adds only the '# [Provenance debug handles]' comments.")


def _validate_inductor_config(value: dict[str, Any]) -> dict[str, Any]:
    # Keys are checked against torch._inductor.config in the worker (the web process has no torch);
    # here only the shape is checked.
    for key in value:
        if not isinstance(key, str) or not key.replace(".", "_").replace("_", "a").isalnum():
            raise OptionError(f"inductor_config key {key!r} is not a config name")
    return value


class PyTorchPipeline(Pipeline):
    key = "pytorch"
    title = "PyTorch (torch.compile)"
    editor_mode = "python"
    example = EXAMPLE
    toolchain_packages = ("torch", "triton")
    warmup_source = toolchain_cache.WARMUP_SOURCE
    prewarm_modules = ("torch", "torch._dynamo", "torch._inductor.compile_fx")
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

    def run(self, request: Request, ctx: JobContext) -> None:
        options, bundle = request.options, ctx.bundle
        bundle.add("source", "Source", "Source", "python", request.source,
                   source_map=[[n, n] for n in range(1, request.source.count("\n") + 2)])
        path = write_user_file(request.source, USER_FILE, ctx.workdir)
        cache_dir = _inductor_cache_dir(ctx.workdir)
        probes = toolchain_cache.import_probes(ctx.toolchain_cache, cache_dir)
        bundle.progress("importing torch")
        started = time.perf_counter()
        import torch
        import torch._inductor.config as inductor_config
        import_s = time.perf_counter() - started
        # Provenance tracking links each kernel to the user's lines; it only adds
        # "# [Provenance debug handles]" comments to the wrapper (disclosed on the stage).
        inductor_config.trace.provenance_tracking_level = 1
        logs = artifact_logs.install(torch)
        inductor_config.cpp_wrapper = options["cpp_wrapper"]
        for key, value in options["inductor_config"].items():
            _set_config(inductor_config, key, value)
        if options["export"] and options["training"]:
            raise UserError("OptionError", "export and training do not combine: torch.export captures inference "
                                           "graphs for AOTInductor")

        bundle.progress("running your source")
        namespace, printed = run_source(ctx, path)
        model, inputs = _entry_points(namespace, torch)
        if options["target"] != "host":
            if not torch.cuda.is_available():
                self._virtual_gpu(request, ctx, model, inputs, printed)
                return
            model, inputs = _to_cuda(model, inputs, torch)
            bundle.timing("target", {"name": torch.cuda.get_device_name(), "requested": options["target"],
                                     "capability": "sm_%d%d" % torch.cuda.get_device_capability(),
                                     "virtual": False, "executed": True})
        compiled = None if options["export"] else torch.compile(
            model, backend=options["backend"], mode=None if options["mode"] == "default" else options["mode"],
            dynamic=None if options["dynamic"] == "auto" else options["dynamic"], fullgraph=options["fullgraph"])
        bundle.progress("compiling (Dynamo, AOTAutograd, Inductor)")
        sink = CappedText(ctx.limits.output_bytes)
        error: UserError | None = None
        started = time.perf_counter()
        try:
            with captured_stdout(sink):
                if options["export"]:
                    compiled = export.export_and_package(model, inputs, os.path.dirname(path), bundle,
                                                         (path, USER_FILE), torch)
                outputs = compiled(*inputs)
                if options["training"]:
                    bundle.progress("running backward (compiles the backward graph)")
                    measure.loss_of(outputs, torch).backward()
        except BaseException as e:  # noqa: BLE001 - compile and user errors are reported, stages kept
            if isinstance(e, KeyboardInterrupt):
                raise
            error = user_error(e, path, ctx.limits, _error_kind(e))
        first_call_s = time.perf_counter() - started
        bundle.add("run.stdout", "Program output", "Run", "text", printed + sink.getvalue())
        bundle.progress("reading the structured trace")
        entries = torch_trace.read_dir(_trace_dir(ctx.workdir))
        trace_stages.write(bundle, trace_stages.trace_stages(entries, (path, USER_FILE), _PROVENANCE_NOTE))
        _write_log_stages(bundle, artifact_logs.texts(logs), torch_trace.compile_ids(entries),
                          (path, USER_FILE))
        timings = trace_stages.compile_timings(entries)
        timings["import_torch_s"] = round(import_s, 3)
        timings["first_call_s"] = round(first_call_s, 3)
        timings["isa_probes_from_toolchain_cache"] = probes
        bundle.timing("compile", timings)
        if error is not None:
            raise error
        if ctx.export_toolchain_cache:  # the trusted warm-up job only
            toolchain_cache.export_probes(cache_dir, ctx.export_toolchain_cache)
            return
        bundle.progress("timing eager and compiled calls")
        run = measure.measure(model, compiled, inputs, options["training"], torch)
        kernels = {"table": run.pop("kernels"), "events": run.pop("kernel_timeline"), "where": run["where"]}
        bundle.add("run.kernels", "Profile of one compiled call", "Timings", "profile", kernels)
        bundle.timing("run", run)

    def _virtual_gpu(self, request: Request, ctx: JobContext, model: Any, inputs: tuple, printed: str) -> None:
        """No CUDA device here: Inductor generates GPU code for a virtual one (gpu_codegen)."""
        from compiler.pytorch.gpu_codegen import run_virtual_gpu
        ctx.bundle.add("run.stdout", "Program output", "Run", "text", printed)
        try:
            run_virtual_gpu(model, inputs, request.options["target"], ctx, request.options)
        except OptionError as e:
            raise UserError("OptionError", str(e)) from None
        finally:
            entries = torch_trace.read_dir(_trace_dir(ctx.workdir))
            ctx.bundle.timing("compile", trace_stages.compile_timings(entries))


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
            raise UserError("OptionError", f"inductor_config: torch._inductor.config has no section {section!r}")
    if not hasattr(target, name):
        raise UserError("OptionError", f"inductor_config: torch._inductor.config has no {key!r}")
    current = getattr(target, name)
    if current is not None and value is not None and not isinstance(value, type(current)) \
            and not (isinstance(current, float) and isinstance(value, int)):
        raise UserError("OptionError", f"inductor_config[{key!r}] takes a {type(current).__name__} "
                                       f"(now {current!r}), not {value!r}")
    setattr(target, name, value)


def _entry_points(namespace: dict[str, Any], torch: Any) -> tuple[Any, tuple]:
    if "model" not in namespace:
        raise UserError("InputError", "the source must define `model` (an nn.Module or a function)")
    if "example_inputs" not in namespace:
        raise UserError("InputError", "the source must define `example_inputs` (a tuple of inputs, "
                                      "or a function returning one)")
    model = namespace["model"]
    if not callable(model):
        raise UserError("InputError", f"`model` must be an nn.Module or a function, not {type(model).__name__}")
    inputs = namespace["example_inputs"]
    if callable(inputs):
        inputs = inputs()
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if isinstance(inputs, list):
        inputs = tuple(inputs)
    if not isinstance(inputs, tuple):
        raise UserError("InputError", f"`example_inputs` must be a tuple (or a function returning one), "
                                      f"not {type(inputs).__name__}")
    return model, inputs


def _error_kind(exc: BaseException) -> str:
    module = type(exc).__module__ or ""
    return "CompileError" if module.startswith(("torch._dynamo", "torch._inductor", "torch._functorch")) \
        else "UserCodeError"


# artifact log -> (stage key prefix, title, format)
_LOG_STAGES = (
    ("bytecode", "dynamo.bytecode", "Bytecode, original and modified"),
    ("ir_pre_fusion", "inductor.ir_pre_fusion", "IR before fusion"),
    ("ir_post_fusion", "inductor.ir_post_fusion", "IR after fusion"),
    ("fusion", "inductor.fusion", "Fusion decisions"),
)


def _write_log_stages(bundle: Bundle, texts: dict[tuple[str, str], str], trace_ids: list[str],
                      user_paths: tuple[str, ...]) -> None:
    def trace_id(log_id: str) -> str:
        # The logging side knows "0/0"; the trace names the attempt that got through ("0/0_1").
        if log_id == "?":  # no compile context: AOTInductor on the export path
            return trace_stages.UNFRAMED
        attempts = [t for t in trace_ids if t == log_id or t.startswith(log_id + "_")]
        return attempts[-1] if attempts else log_id

    for log_id in dict.fromkeys(c for c, _ in texts):
        cid = trace_id(log_id)
        for artifact, key, title in _LOG_STAGES:
            text = texts.get((log_id, artifact))
            if text:
                if artifact.startswith("ir_"):
                    pairs = torch_source_map.ir_block_map(text, user_paths)
                elif artifact == "bytecode":
                    pairs = torch_source_map.bytecode_map(text, user_paths)
                else:
                    pairs = torch_source_map.mention_map(text, user_paths)
                group = "Dynamo" if key.startswith("dynamo.") else "Inductor"
                bundle.add(f"{key}:{cid}", f"{title} [{cid}]", group, "text", text, source_map=pairs)


