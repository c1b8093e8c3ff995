"""XLA (the compiler in jaxlib) on host CPU with N virtual devices, for three inputs:

- `hlo`: HLO text as XLA prints it, shardings included (GSPMD propagation and partitioning);
- `stablehlo`: StableHLO/MHLO MLIR text;
- `jax`: Python defining `fn` and `example_args`, lowered by `jax.jit(fn).lower(*example_args)`; or a
  program that calls jax.jit itself, run as written, each of its own modules compiled with its own
  stages (`xla.optimized:jit_f`, ...).

All three go through one compile, run in a child process (compiler/xla/child.py) because XLA
aborts on some malformed input. Every stage is what XLA wrote: its dump directory (pass
snapshots, buffer assignment, live ranges, LLVM IR, object files), the executable's module,
memory stats and cost analysis. This module imports no jax: the parent only reads files.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from compiler import graph_drawing
from compiler.errors import ErrorKind
from compiler.model import Request
from compiler.pipeline import Bundle, JobContext, LogReader, Option, OptionError, Pipeline, UserError
from compiler.targets.xla_gpu import XLA_GPU_TARGETS, describe_xla_gpu_target, get_xla_gpu_target, virtual_note
from compiler.user_code import runs_as_written
from compiler.xla import (
    child_process,
    dump_index,
    dump_stages,
    gpu_code,
    gpu_schedule,
    hlo_text,
    sharding,
    source_map,
    traces,
)
from compiler.xla.dump_stages import ModuleStages
from compiler.xla.errors import fatal_message, hlo_error_line, input_names
from compiler.xla.options import validate_xla_options
from compiler.xla.protos import parse_text_proto

# The child's wall limit; the sandbox's own limits (settings table) are normally hit first.
CHILD_TIMEOUT_S = 900
# Big modules have hundreds of pass snapshots; each is a stage, so cap how many are kept.
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HLO_EXAMPLE = '''HloModule sharded_mlp

// 8 devices as a 4x2 mesh: x is split over rows on the 4-way axis and replicated over the
// 2-way axis; w is split over columns on the 2-way axis and replicated over the 4-way axis.
add_f32 {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT add = f32[] add(lhs, rhs)
}

ENTRY main {
  x = f32[64,128] parameter(0), sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}
  w = f32[128,256] parameter(1), sharding={devices=[1,2,4]<=[4,2]T(1,0) last_tile_dim_replicate}
  b = f32[256] parameter(2), sharding={replicated}
  dot = f32[64,256] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bias = f32[64,256] broadcast(b), dimensions={1}
  add = f32[64,256] add(dot, bias)
  act = f32[64,256] tanh(add)
  zero = f32[] constant(0)
  ROOT sum = f32[64] reduce(act, zero), dimensions={1}, to_apply=add_f32,
    sharding={devices=[4,2]<=[8] last_tile_dim_replicate}
}
'''

STABLEHLO_EXAMPLE = '''module @sharded_matmul attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<64x128xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"},
                         %w: tensor<128x256xf32> {mhlo.sharding = "{replicated}"})
      -> (tensor<64x256xf32> {mhlo.sharding = "{devices=[1,8]<=[8]}"}) {
    %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
        : (tensor<64x128xf32>, tensor<128x256xf32>) -> tensor<64x256xf32>
    %1 = stablehlo.logistic %0 : tensor<64x256xf32>
    return %1 : tensor<64x256xf32>
  }
}
'''

JAX_EXAMPLE = '''import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

# 8 virtual CPU devices as a 4x2 mesh: batch over "data", heads over "model". Auto axes leave
# the shardings in between to XLA's propagation (Shardy).
mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(jax.sharding.AxisType.Auto,) * 2)


def fn(x, wq, wk, wv, wo):
    q = jnp.einsum("bsd,dhk->bhsk", x, wq)
    k = jnp.einsum("bsd,dhk->bhsk", x, wk)
    v = jnp.einsum("bsd,dhk->bhsk", x, wv)
    scores = jnp.einsum("bhqk,bhsk->bhqs", q, k) / jnp.sqrt(q.shape[-1])
    attn = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("bhqs,bhsk->bhqk", attn, v)
    return jnp.einsum("bhqk,hkd->bqd", out, wo)


def spec(shape, *axes):
    return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, P(*axes)))


B, S, D, H, K = 8, 32, 64, 4, 16
example_args = (
    spec((B, S, D), "data", None, None),
    spec((D, H, K), None, "model", None),
    spec((D, H, K), None, "model", None),
    spec((D, H, K), None, "model", None),
    spec((H, K, D), "model", None, None),
)
'''


def _validate_xla_options(value: dict[str, Any]) -> dict[str, Any]:
    try:
        return validate_xla_options(value)
    except ValueError as e:
        raise OptionError(str(e)) from None


_OPTIONS = (
    Option("target", "choice", "cpu", "what XLA compiles for: the host CPU (XLA:CPU, run and timed), or a virtual "
           "GPU (XLA:GPU from the jax-cuda12 plugin for a topology of `devices` GPUs described by XLA's own spec "
           "of that GPU: compiled, not run; autotuning off, so GEMM fusions keep default tile configs)",
           choices=("cpu", *XLA_GPU_TARGETS)),
    Option("devices", "int", 8, "number of devices: virtual XLA CPU devices (--xla_force_host_platform_device_count), "
           "or the GPUs of the virtual topology", minimum=1, maximum=64),
    Option("xla_options", "dict", {}, "XLA DebugOptions fields, e.g. {\"xla_cpu_enable_fast_math\": true} or, for a "
           "GPU target, the latency-hiding scheduler's estimator: {\"xla_gpu_enable_analytical_latency_estimator\": "
           "true} or {\"xla_gpu_enable_analytical_sol_latency_estimator\": true} (Hopper and later); names are "
           "checked against XLA's DebugOptions", validate_value=_validate_xla_options),
    Option("time_run", "bool", True, "CPU target: run the compiled executable on random inputs and time it "
           "(a virtual GPU runs nothing)"),
    Option("triton_ir", "bool", False, "GPU targets: also dump every MLIR pass of each Triton fusion (TTIR, TTGIR, "
           "down to LLVM) - XLA's xla_dump_emitter_re; makes the compile 10-20x slower"),
)

# The GPU dump's per-kernel stages are capped like the CPU ones; Triton pass dumps are large.
MAX_TRITON_FUSIONS = 16


def _device_flags(devices: int) -> str:
    flags = os.environ.get("XLA_FLAGS", "")
    flags = re.sub(r"--xla_force_host_platform_device_count=\S*", "", flags).strip()
    return (flags + f" --xla_force_host_platform_device_count={devices}").strip()


def _has_nvidia_gpu() -> bool:
    """Whether this worker sees an NVIDIA driver (a GPU worker); the child then tries the real device."""
    return os.path.exists("/dev/nvidiactl") and os.path.isdir("/proc/driver/nvidia/gpus")


def _jax_platforms(target: str) -> str:
    # Only the host CPU client starts (the jax-cuda12 plugin would otherwise try to load CUDA and
    # warn); the virtual GPU's compile-only client comes from the topology API regardless.
    return "cuda,cpu" if target != "cpu" and _has_nvidia_gpu() else "cpu"


def _child_environment(variables: dict[str, str]) -> dict[str, str]:
    """The child's environment: this process's, with `variables` and the repository importable."""
    env = dict(os.environ, **variables)
    env["PYTHONPATH"] = _REPO_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _read(path: str, limit: int | None = None) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read(limit) if limit else f.read()


class XlaPipeline(Pipeline):
    """Shared by the three input languages; each subclass says how its input reaches StableHLO
    and how XLA's messages and locations map back to it (the hooks below)."""

    options = _OPTIONS
    stablehlo_note = ""  # how the StableHLO stage was made from the input
    echoes_input = True  # an `xla.input` stage: the module exactly as XLA received it (the editor's text)

    # --- the input language's hooks ---------------------------------------------------------

    def write_input(self, source: str, work: str) -> dict[str, Any]:
        """Files the child needs for the input, as fields of its job."""
        return {}

    def user_file(self, work: str) -> str | None:
        """The file name XLA's locations give the user's input (None: they name none)."""
        return None

    def input_names(self, source: str) -> dict[str, int] | None:
        """Instruction name -> the line of the input defining it, for inputs that name them."""
        return None

    def stablehlo_map(self, stablehlo: str, user_file: str | None, names: dict[str, int] | None,
                      lines: int) -> list[list[int]]:
        """The StableHLO stage's lines -> the input's lines."""
        return source_map.mlir_source_map(stablehlo, user_file)

    def error_line(self, message: str, source: str) -> int | None:
        """The input's line an XLA error message points at."""
        return hlo_error_line(message)

    def compile_error_kind(self, message: str) -> ErrorKind:
        """The kind of error XLA's compile failing with `message` is, for this input."""
        return ErrorKind.CompileError
    # the GPU targets compile with the plugin's XLA:GPU and the wheel's ptxas
    toolchain_packages = ("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt", "nvidia-cuda-nvcc-cu12")
    requires = ("jax", "jaxlib")

    def packages_used(self, options: dict[str, Any]) -> tuple[str, ...]:
        """XLA:CPU is jaxlib's own (JAX_PLATFORMS=cpu: the CUDA plugin is never loaded); a GPU
        target compiles with the plugin and the wheel's ptxas too."""
        return self.requires if options.get("target", "cpu") == "cpu" else self.toolchain_packages

    def toolchain_refusal(self, options: dict[str, Any], versions: dict[str, str]) -> str | None:
        """XLA:CPU is in jaxlib; a virtual XLA:GPU target needs the CUDA plugin of jaxlib's release."""
        why = super().toolchain_refusal(options, versions)
        if why is None and options.get("target", "cpu") != "cpu":
            plugin, jaxlib = versions.get("jax-cuda12-plugin"), versions.get("jaxlib")
            if plugin != jaxlib or "nvidia-cuda-nvcc-cu12" not in versions:
                why = (f"the virtual XLA:GPU target {options['target']} needs jax-cuda12-plugin {jaxlib} (jaxlib's "
                       f"release) and nvidia-cuda-nvcc-cu12; this toolchain has jax-cuda12-plugin {plugin or 'none'}")
        return why

    # The worker imports no jax and sets no variable of its own: the child's environment has the
    # job's (_child_environment). So a spare is kept, whose child imports jax before its job exists.
    prewarm_modules = ("compiler.xla.child_process",)
    _ahead: child_process.WaitingChild | None = None

    def prepare_spare(self, workdir: str, toolchain_cache: str, kind: str = "",
                      job_arrived: Callable[[], bool] = lambda: False, export_toolchain_cache: str = "") -> None:
        super().prepare_spare(workdir, toolchain_cache, kind, job_arrived, export_toolchain_cache)
        self._ahead = child_process.WaitingChild(workdir, _child_environment({}))

    # --- the child --------------------------------------------------------------------------

    def _run_child(self, request: Request, job_path: str, work: str) -> child_process.Ended:
        """The child, run on `job_path` in `work`: the spare's child started ahead where it serves
        this job as a fresh one would, else one started for it. ChildTimeout past CHILD_TIMEOUT_S."""
        env = _child_environment({
            # XLA reads the device count when the CPU client starts, so it must be in XLA_FLAGS first.
            "XLA_FLAGS": _device_flags(int(request.options.get("devices", 8))),
            "JAX_PLATFORMS": _jax_platforms(request.options["target"])})
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            if ahead.serves(env):
                return ahead.run(job_path, env, work, CHILD_TIMEOUT_S)
            ahead.close()
        return child_process.run_fresh(job_path, env, work, CHILD_TIMEOUT_S)

    def _compile(self, request: Request, work: str, ctx: JobContext) -> dict[str, Any]:
        bundle = ctx.bundle
        job = {"language": self.key, "source": request.source, "options": dict(request.options),
               "workdir": work, "dump_dir": os.path.join(work, "dump"),
               "run": bool(request.options.get("time_run", True)),
               "settings": ctx.settings.to_json()}
        target = request.options["target"]
        job["target"] = target
        if target != "cpu":
            gpu = get_xla_gpu_target(target)
            job.update(target_config=gpu.config_path, target_product=gpu.product, real_gpu=_has_nvidia_gpu(),
                       run=False)
        job.update(self.write_input(request.source, work))
        job_path = os.path.join(work, "job.json")
        with open(job_path, "w", encoding="utf-8") as f:
            json.dump(job, f)
        bundle.progress("compiling with XLA" + ("" if target == "cpu" else f":GPU for {target}"))
        t0 = time.perf_counter()
        try:
            proc = self._run_child(request, job_path, work)
        except child_process.ChildTimeout:
            raise UserError(ErrorKind.CompileTimeout, f"XLA did not finish within {CHILD_TIMEOUT_S} s") from None
        wall_ms = (time.perf_counter() - t0) * 1e3
        result_path = os.path.join(work, "result.json")
        if not os.path.exists(result_path):
            message = fatal_message(proc.stderr)
            if message is None:
                raise RuntimeError(f"the XLA child process exited with status {proc.returncode}: "
                                   f"{proc.stderr[-2000:]}")
            line = self.error_line(message, request.source)
            phase_path = os.path.join(work, "phase.txt")
            doing = _read(phase_path).strip() if os.path.exists(phase_path) else "starting"
            raise UserError(ErrorKind.CompileError, f"XLA aborted while {doing}: {message}", line)
        with open(result_path, encoding="utf-8") as f:
            result = json.load(f)
        if "error" in result:
            e = result["error"]
            if e["kind"] == ErrorKind.InternalError:
                raise RuntimeError(e["message"])
            if e.get("at") == "compile" and e["kind"] == ErrorKind.CompileError:
                raise UserError(self.compile_error_kind(e["message"]), e["message"],
                                self.error_line(e["message"], request.source))
            raise UserError(e["kind"], e["message"], e.get("line"))
        result["child_ms"] = wall_ms
        result["child_started"] = proc.started
        return result

    # --- stages -----------------------------------------------------------------------------

    def run(self, request: Request, ctx: JobContext) -> None:
        # The dump holds every pass snapshot; once its stages are in the bundle it can go.
        work = tempfile.mkdtemp(prefix="xla-", dir=ctx.workdir)
        try:
            self._run(request, ctx, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _run(self, request: Request, ctx: JobContext, work: str) -> None:
        bundle = ctx.bundle
        lines = request.source.count("\n") + 1
        if self.echoes_input:
            bundle.add("xla.input", "Input", "Input", self.lexer, request.source,
                       source_map=[[n, n] for n in range(1, lines + 1)])
        result = self._compile(request, work, ctx)
        target = result.get("target", "cpu")
        gpu = get_xla_gpu_target(target) if target != "cpu" else None
        if gpu is not None:
            bundle.timing("target", describe_xla_gpu_target(gpu, int(result["devices"]), result.get("real_device")))
        dump_dir = os.path.join(work, "dump")
        compiled = result.get("compiled")
        if compiled is None:  # the job's one module, its stages keyed as they always were
            compile_timing = self._module_stages(ModuleStages(bundle), result, work, dump_dir, request, ctx, gpu)
            run = result.get("run")
        else:  # a JAX program: each module of its own that irscope compiled, keyed and grouped by module
            _program_stages(bundle, result["modules"], result.get("printed", ""), target == "cpu")
            resources: list[Any] = []
            timings = [self._module_stages(ModuleStages(bundle, r["key"], r["group"]), r, work,
                                           os.path.join(dump_dir, r["dump"]), request, ctx, gpu, resources)
                       for r in compiled]
            if resources:
                _write_resources(bundle, resources)
            compile_timing = _program_timing(result, compiled, timings)
            run = next((dict(r["run"], module=r["key"]) for r in compiled if r.get("run")), None)
        bundle.timing("compile", compile_timing)
        if run:
            bundle.timing("run", dict(run, what="the compiled executable, all devices, on random inputs"))

    def _module_stages(self, bundle: ModuleStages, result: dict[str, Any], work: str, dump_dir: str,
                       request: Request, ctx: JobContext, gpu: Any,
                       resources: list[Any] | None = None) -> dict[str, Any]:
        """Every stage of one compiled module (`result`, its dump in `dump_dir`): StableHLO, the pass
        snapshots, sharding, the optimized module, schedule, memory, cost, code, the graph. Returns
        its compile timing. A GPU module's kernel resources go to `resources` when given (a
        program's table of every module's kernels), else to its own table."""
        lines = request.source.count("\n") + 1
        user_file = self.user_file(work)
        names = self.input_names(request.source)

        def hlo_map(text: str) -> list[list[int]]:
            return source_map.hlo_source_map(hlo_text.parse_hlo_text(text), user_file, names, text)

        # StableHLO
        stablehlo = result["stablehlo"]
        bundle.add("xla.stablehlo", "StableHLO", "Input", "mlir", stablehlo,
                   source_map=self.stablehlo_map(stablehlo, user_file, names, lines),
                   meta={"note": self.stablehlo_note if not bundle.module else
                         f"the module JAX handed XLA to compile for {bundle.module}, as JAX dumped it "
                         "(jax_dump_ir_to)"})

        bundle.progress("reading XLA's dump")
        index = dump_index.read_dump(dump_dir)
        if index is None:
            raise RuntimeError("XLA wrote no dump for the compiled module")
        before_text = _read(os.path.join(dump_dir, index.before_optimizations)) if index.before_optimizations else ""

        runs = traces.pass_runs(result.get("trace") or [], index.prefix.split(".", 1)[1])
        passes = self._pass_stages(bundle, index, dump_dir, before_text, hlo_map, runs)
        self._sharding_stages(bundle, index, dump_dir, before_text, result, hlo_map)

        optimized = result["optimized"]
        opt_module = hlo_text.parse_hlo_text(optimized)
        opt_meta: dict[str, Any] = {"scheduled": opt_module.is_scheduled, "module": opt_module.name,
                                    "counts": module_counts(opt_module)}
        if gpu is not None:
            opt_meta["note"] = (f"XLA:GPU's optimized, scheduled module for {gpu.product} "
                                f"({index.after_optimizations}); "
                                + (virtual_note(gpu) if not result.get("real_device") else
                                   f"compiled on the worker's {result['real_device']}"))
        bundle.add("xla.optimized", "Optimized HLO", "XLA", "hlo", optimized, source_map=hlo_map(optimized),
                   meta=opt_meta)
        costs = {c["name"]: c for c in result.get("cost", [])}
        sched = hlo_text.schedule(opt_module)
        for comp in sched:
            for ins in comp["instructions"]:
                c = costs.get(ins["name"]) if comp["entry"] else None
                if c:
                    ins.update({k: c[k] for k in ("flops", "bytes_accessed", "transcendentals") if k in c})
        schedule = {"computations": [c for c in sched if c["instructions"]], "scheduled": opt_module.is_scheduled,
                    "module": opt_module.name}
        sched_note = "instruction order of each computation in the scheduled module"
        if gpu is not None:
            sched_note = self._gpu_schedule(schedule, opt_module, index, dump_dir)
        bundle.add("xla.schedule", "Schedule", "XLA", "timeline", schedule, meta={"note": sched_note})
        self._memory_stages(bundle, index, dump_dir, result)
        self._cost_stage(bundle, result)
        if gpu is None:
            self._code_stages(bundle, index, dump_dir)
        else:
            self._gpu_code_stages(bundle, index, dump_dir, opt_module, dict(map(tuple, hlo_map(optimized))),
                                  ctx.workdir, gpu, resources)
        bindings = result.get("hlo_bindings", "jaxlib._hlo")  # compiler/xla/jaxlib_hlo.py
        graph_drawing.add_graph(bundle, "xla.graph", "HLO graph", "XLA", result["dot"],
                                meta={"note": f"{bindings}.hlo_module_to_dot_graph of the optimized module's entry "
                                              "computation, laid out by Graphviz"})

        compile_timing: dict[str, Any] = {"total_ms": result["compile_ms"], "child_process_ms": result.get("child_ms"),
                                          "child_process": result.get("child_started"),
                                          "passes": passes,
                                          "passes_note": ("duration of every pass from XLA's TraceMe events "
                                                          "(nested pipelines appear as passes too)" if runs else
                                                          "ms between consecutive pass snapshots (file times): "
                                                          "unchanged passes are not dumped, so each figure covers "
                                                          "every pass since the previous snapshot, dumping "
                                                          "included")}
        phases = traces.trace_phases(result.get("trace") or [], index.prefix.split(".", 1)[1])
        # `<phase>_s` keys are what the Timings tab draws as bars.
        if result.get("lower_ms") is not None:
            compile_timing["lower_ms"] = result["lower_ms"]
            compile_timing["jax_lowering_s"] = result["lower_ms"] / 1e3
        compile_timing["xla_compile_s"] = result["compile_ms"] / 1e3
        if phases:
            compile_timing["phases_ms"] = phases
            for key, name in (("hlo_passes_s", "hlo_pass_pipelines"), ("backend_s", "CpuCompiler::RunBackend"),
                              ("thunk_emission_s", "ThunkEmitter::EmitEntryComputation"),
                              ("kernel_compile_s", "FusionCompiler::Compile"), ("llvm_codegen_s", "Codegen")):
                if name in phases:
                    compile_timing[key] = phases[name] / 1e3
        compile_timing["source"] = ("wall time of XLA's compile_and_load; phases from XLA's own trace events "
                                    "(backend includes thunk emission, kernel compile and codegen)")
        if gpu is not None:
            compile_timing["source"] = (f"wall time of XLA:GPU's compile for {result.get('target')} on the host CPU "
                                        "(a compile-only client); phases where XLA's trace events reached jaxlib's "
                                        "profiler")
        return compile_timing

    def _pass_stages(self, bundle: ModuleStages, index: dump_index.DumpIndex, dump_dir: str, before_text: str,
                     hlo_map: Any, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return dump_stages.pass_stages(bundle, index, dump_dir, before_text, hlo_map, runs)

    def _sharding_stages(self, bundle: ModuleStages, index: dump_index.DumpIndex, dump_dir: str, before_text: str,
                         result: dict[str, Any], hlo_map: Any) -> None:
        devices = int(result["devices"])
        propagated = [s for s in index.snapshots if s.before == "spmd-partitioning"]
        partitioned = [s for s in index.snapshots if s.after == "spmd-partitioning"]
        prop_text = _read(os.path.join(dump_dir, propagated[-1].file)) if propagated else before_text
        prop_module = hlo_text.parse_hlo_text(prop_text)
        before = hlo_text.parse_hlo_text(before_text) if before_text else prop_module
        arrays = []
        entry = before.entry
        params = sorted((i for i in entry.instructions if i.opcode == "parameter"),
                        key=lambda i: int(i.operands[0]) if i.operands and i.operands[0].isdigit() else 0) \
            if entry else []
        param_shardings = result["shardings"]["parameters"]
        for k, p in enumerate(params):
            # One device: XLA drops the shardings (num_partitions=1), so the array is whole on device 0.
            text = (param_shardings[k] if k < len(param_shardings) else
                    "{replicated}" if devices == 1 else (p.sharding or "{replicated}"))
            leaves = hlo_text.parse_shapes(p.shape)
            parsed = sharding.parse_sharding(text)
            for n, leaf in enumerate(leaves):
                # A tuple parameter has one sharding per element.
                leaf_text = (parsed["elements"][n]["text"] if parsed["type"] == "tuple" and n < len(parsed["elements"])
                             else text)
                role = f"parameter {k}" if len(leaves) == 1 else f"parameter {k} {{{n}}}"
                arrays.append(self._array_picture(role, p.name, leaf, leaf_text, devices))
        root = next((i for i in entry.instructions if i.is_root), None) if entry else None
        if root is not None:
            leaves = hlo_text.parse_shapes(root.shape)
            outs = result["shardings"]["outputs"]
            for k, leaf in enumerate(leaves):
                text = outs[k] if k < len(outs) else "{replicated}"
                parsed = sharding.parse_sharding(text)
                if parsed["type"] == "tuple" and k < len(parsed["elements"]):
                    text = parsed["elements"][k]["text"]
                arrays.append(self._array_picture("result" if len(leaves) == 1 else f"result {k}", root.name,
                                                  leaf, text, devices))
        table = [{"name": i.name, "opcode": i.opcode,
                  "shape": i.shape.split("{")[0] if not i.shape.startswith("(") else i.shape,
                  "sharding": i.sharding or "", "computation": i.computation, "line": i.line}
                 for i in prop_module.instructions()]
        spmd_text = _read(os.path.join(dump_dir, partitioned[-1].file)) if partitioned else ""
        found = sharding.collectives(hlo_text.parse_hlo_text(spmd_text), devices) if spmd_text else []
        source = bundle.key(dump_stages.snapshot_key(propagated[-1]) if propagated else "xla.pass:before_optimizations")
        data = {"devices": devices, "partitioner": "shardy" if result.get("shardy") else "gspmd",
                "arrays": arrays, "instructions": table, "collectives": found, "from_stage": source}
        bundle.add("xla.sharding", "Sharding", "SPMD", "mesh", data,
                   meta={"note": f"shardings after propagation ({source}); collectives of the partitioned module"})
        if spmd_text:
            bundle.add("xla.spmd", "Partitioned HLO", "SPMD", "hlo", spmd_text, source_map=hlo_map(spmd_text),
                       meta={"collectives": found, "snapshot": partitioned[-1].file})
        else:
            bundle.add("xla.spmd", "Partitioned HLO", "SPMD", "text",
                       "XLA ran no SPMD partitioner for this module (one device, or no shardings).\n")

    @staticmethod
    def _array_picture(role: str, name: str, shape: hlo_text.ArrayShape, text: str, devices: int) -> dict[str, Any]:
        parsed = sharding.parse_sharding(text)
        return {"role": role, "name": name, "shape": str(shape), "dims": list(shape.dims), "sharding": text,
                "type": parsed["type"], "tile_dims": parsed.get("tile_dims"), "subgroups": parsed.get("subgroups", []),
                "tile_devices": parsed.get("devices"),
                "tiles": sharding.sharding_tiles(shape.dims, parsed, devices)}

    def _memory_stages(self, bundle: ModuleStages, index: dump_index.DumpIndex, dump_dir: str,
                       result: dict[str, Any]) -> None:
        dump_stages.memory_stages(bundle, index, dump_dir, result["memory"])

    def _cost_stage(self, bundle: ModuleStages, result: dict[str, Any]) -> None:
        rows = result.get("cost", [])
        total = result.get("cost_total")
        gpu = result.get("target", "cpu") != "cpu"
        if total is None:
            # A compile-only GPU executable has no cost analysis (XLA: "GetCostAnalysis is not supported")
            total = {"flops": sum(r.get("flops", 0) for r in rows),
                     "transcendentals": sum(r.get("transcendentals", 0) for r in rows),
                     "bytes accessed": sum(r.get("bytes_accessed", 0) for r in rows)}
        width = max([len(r["name"]) for r in rows] + [11])
        header = f"{'instruction':<{width}}  {'opcode':<20} {'flops':>14} {'transcend.':>12} {'bytes accessed':>16}"
        out = [header, "-" * len(header)]
        for r in rows:
            if "error" in r:
                out.append(f"{r['name']:<{width}}  {r['opcode']:<20} (not isolable: {r['error']})")
                continue
            out.append(f"{r['name']:<{width}}  {r['opcode']:<20} {r['flops']:>14,.0f} {r['transcendentals']:>12,.0f} "
                       f"{r['bytes_accessed']:>16,.0f}")
        out.append("-" * len(header))
        out.append(f"{'module total (XLA)':<{width}}  {'':<20} {total.get('flops', 0):>14,.0f} "
                   f"{total.get('transcendentals', 0):>12,.0f} {total.get('bytes accessed', 0):>16,.0f}")
        note = ("XLA's HloCostAnalysis (jaxlib hlo_module_cost_analysis) per entry instruction, each run on a module "
                "holding that instruction alone; the total is the executable's cost_analysis(). Per device.")
        if gpu:
            note = ("XLA's HloCostAnalysis (jaxlib hlo_module_cost_analysis, run by the host CPU client: a "
                    "compile-only GPU executable has no cost analysis) per entry instruction of the GPU-optimized "
                    "module, each on a module holding that instruction alone; the total is their sum. Per device. "
                    "The latency-hiding scheduler's own estimates are in the Schedule stage.")
        bundle.add("xla.cost", "Cost analysis", "XLA", "text", "\n".join(out) + "\n",
                   meta={"total": total, "instructions": rows, "note": note})

    def _code_stages(self, bundle: ModuleStages, index: dump_index.DumpIndex, dump_dir: str) -> None:
        dump_stages.code_stages(bundle, index, dump_dir)


    def _gpu_schedule(self, schedule: dict[str, Any], module: hlo_text.HloText, index: dump_index.DumpIndex,
                      dump_dir: str) -> str:
        """Add the latency-hiding scheduler's estimates and each computation's async pairs to the
        schedule; the stage's note says what the numbers are."""
        comps = {c.name: c for c in module.computations}
        estimates: dict[str, Any] = {}
        if index.schedule:
            estimates = gpu_schedule.schedule_records(
                parse_text_proto(_read(os.path.join(dump_dir, index.schedule)), "xla.ScheduleProto"))
        per_unit = None
        for comp in schedule["computations"]:
            if comp["computation"] in comps:
                comp["async_pairs"] = gpu_schedule.async_pairs(comps[comp["computation"]])
            lhs = estimates.get(comp["computation"])
            if not lhs:
                continue
            comp["statistics"] = lhs["statistics"]
            per_unit = lhs.get("cycles_per_microsecond", per_unit)
            times = {r["name"]: r for r in lhs["instructions"]}
            for ins in comp["instructions"]:
                if ins["name"] in times:
                    ins["start"], ins["end"] = times[ins["name"]]["start"], times[ins["name"]]["end"]
        unit = f"; cycles_per_microsecond = {per_unit} as XLA dumped it" if per_unit else ""
        schedule["estimates"] = ("estimated start and end of each instruction from XLA:GPU's latency-hiding "
                                 f"scheduler ({index.schedule}), in its cost model's cycles{unit}: estimates of the "
                                 "cost model, not measurements")
        pairs = sum(len(c.get("async_pairs", [])) for c in schedule["computations"])
        return (f"the scheduled order of each computation, {pairs} async start/done pair(s) with what was scheduled "
                f"between them" + ("; the scheduler's estimated timeline from its own dump" if estimates else
                                   "; XLA dumped no latency-hiding schedule (the scheduler did not run)"))

    def _gpu_code_stages(self, bundle: ModuleStages, index: dump_index.DumpIndex, dump_dir: str,
                         module: hlo_text.HloText, opt_pairs: dict[int, int], workdir: str, gpu: Any,
                         resources: list[Any] | None) -> None:
        """The module's XLA:GPU stages (fusions, Triton IR, LLVM IR, PTX, SASS, `kernels.resources`);
        the rows of its kernels go to `resources` instead where given (a program's one table)."""
        decisions = gpu_code.fusion_decisions(module)
        counts: dict[str, int] = {}
        for d in decisions:
            counts[d["decision"]] = counts.get(d["decision"], 0) + 1
        table = gpu_code.render_decisions(decisions)
        # Table rows (after the header and rule) -> the user's line of each instruction.
        smap = [[n, opt_pairs[d["line"]]] for n, d in enumerate(decisions, start=3) if d["line"] in opt_pairs]
        bundle.add("xla.fusions", "Fusion decisions", "XLA", "text", table, source_map=smap,
                   meta={"fusions": decisions, "counts": counts,
                         "note": "each fusion and custom call of the optimized module: Triton GEMM fusions with the "
                                 "tile config in their backend config (autotuning off on a virtual GPU: XLA's "
                                 "default config), cuBLAS/cuDNN custom calls, and the fusions XLA's own emitters "
                                 "generate"})
        for fusion, file in sorted(index.ttir.items())[:MAX_TRITON_FUSIONS]:
            bundle.add(f"xla.triton:{fusion}.ttir", f"TTIR {fusion}", "Triton", "mlir",
                       _read(os.path.join(dump_dir, file)), meta={"file": file, "note": "the TTIR XLA generated "
                                                                  "for this Triton fusion (xla_dump_emitter_re)"})
            dump = index.triton_passes.get(fusion.replace(".", "_"))
            if dump:
                ir = gpu_code.triton_ir(_read(os.path.join(dump_dir, dump)))
                if ir["ttgir"]:
                    bundle.add(f"xla.triton:{fusion}.ttgir", f"TTGIR {fusion}", "Triton", "mlir", ir["ttgir"],
                               meta={"file": dump, "passes": ir["passes"],
                                     "note": "the module before its lowering to LLVM, from XLA's per-pass dump of "
                                             "the Triton pipeline"})

        def number(key: str) -> tuple[int, str]:
            return (int(key), key) if key.isdigit() else (1 << 30, key)

        for key in sorted(index.llvm_ir, key=number)[:dump_stages.MAX_KERNEL_STAGES]:
            file = index.llvm_ir[key]
            bundle.add(f"xla.llvm_ir:{key}", f"LLVM IR {key}", "Code", "llvm", _read(os.path.join(dump_dir, file)),
                       meta={"file": file, "note": "one of the LLVM modules XLA:GPU compiled, after LLVM optimization"})
        ptxas = None
        if index.debug_options:
            options_text = _read(os.path.join(dump_dir, index.debug_options))
            bundle.add("xla.debug_options", "DebugOptions", "XLA", "text", options_text,
                       meta={"file": index.debug_options, "note": "the DebugOptions fields XLA:GPU compiled with that "
                                                                  "differ from their defaults, as XLA dumped them"})
            data_dir = gpu_code.cuda_data_dir(options_text)
            if data_dir and os.access(os.path.join(data_dir, "bin", "ptxas"), os.X_OK):
                ptxas = os.path.join(data_dir, "bin", "ptxas")
        modules = []
        for key in sorted(index.ptx, key=number)[:dump_stages.MAX_KERNEL_STAGES]:
            file = index.ptx[key]
            ptx = _read(os.path.join(dump_dir, file))
            if not ptx.strip():
                continue  # the constants module has no code
            bundle.add(f"xla.ptx:{key}", f"PTX {key}", "Code", "ptx", ptx,
                       meta={"file": file, "target": gpu_code.ptx_target(ptx)})
            modules.append((key, file, ptx))
        sass_parts = []
        if ptxas and modules:
            bundle.progress("assembling and disassembling XLA's PTX")
            # ptxas and nvdisasm are processes: one per core at a time
            with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
                listings = list(pool.map(lambda m: gpu_code.sass_of_ptx(m[2], ptxas, workdir), modules))
            sass_parts = [f"// ===== PTX {key} ({file}): {ran}\n{sass}"
                          for (key, file, _), (sass, ran, _) in zip(modules, listings)]
            rows = self._resource_rows(bundle, gpu, modules, [kernels for _, _, kernels in listings], decisions)
            if resources is None:
                _write_resources(bundle.bundle, rows)
            else:
                resources.extend(rows)
        if sass_parts:
            text = "\n".join(sass_parts)
            if len(text) > dump_stages.MAX_ASM_BYTES:
                text = text[:dump_stages.MAX_ASM_BYTES] + "\n[irscope: disassembly cut]\n"
            bundle.add("xla.sass", "SASS", "Code", "sass", text,
                       meta={"ptxas": ptxas, "modules": len(sass_parts),
                             "note": "XLA's dumped PTX assembled by the ptxas XLA used (xla_gpu_cuda_data_dir) for "
                                     "the PTX's own .target, listed by nvdisasm from the Triton wheel; XLA does not "
                                     "dump its cubin"})

    @staticmethod
    def _resource_rows(bundle: ModuleStages, gpu: Any, modules: list[tuple[str, str, str]],
                       kernels: list[list[dict[str, Any]]], decisions: list[dict[str, Any]]) -> list[Any]:
        """The `kernels.resources` rows of every kernel of a module's PTX (its fusions, Triton's
        among them), each linked to its PTX stage; a program's module named in its label."""
        from compiler.kernels.resources import NVIDIA_SOURCE, nvidia_row
        # XLA names a fusion's kernel after its instruction, '.' and '-' made '_'
        triton = {re.sub(r"[.-]", "_", d["name"]) for d in decisions if str(d.get("decision", "")).startswith("Triton")}
        rows = []
        for (key, _, ptx), found in zip(modules, kernels):
            arch = int(re.sub(r"\D", "", gpu_code.ptx_target(ptx) or "") or 0)
            for kernel in found:
                label = f"{kernel['kernel']} (Triton fusion)" if kernel["kernel"] in triton else kernel["kernel"]
                label += f" [{bundle.module}]" if bundle.module else ""
                rows.append(nvidia_row(label, bundle.key(f"xla.ptx:{key}"), gpu.name, arch, 32,
                                       kernel["threads_per_block"], kernel["cubin_resource_usage"], kernel["ptxas"],
                                       source=NVIDIA_SOURCE.replace("ptxas -v", "ptxas -v (the ptxas XLA used)")))
        return rows


class HloPipeline(XlaPipeline):
    """HLO text as XLA prints it: XLA's parser reads it, jax's importer makes StableHLO of it, and
    its instruction names (kept in XLA's metadata) lead back to its lines."""

    key = "hlo"
    title = "XLA HLO"
    accepts = "HLO text as XLA prints it (shardings included)"
    editor_mode = "text"
    lexer = "hlo"
    extensions = (".hlo",)
    example = HLO_EXAMPLE
    stablehlo_note = "converted from your HLO by jax.extend.mlir.hlo_to_stablehlo"
    # an XLA dump holds HLO modules, whatever made them (the import language reads it)
    log_readers = (LogReader("xla_dump", "an --xla_dump_to directory", "compiler.xla.imported"),)

    def input_names(self, source: str) -> dict[str, int] | None:
        return input_names(source)

    def stablehlo_map(self, stablehlo: str, user_file: str | None, names: dict[str, int] | None,
                      lines: int) -> list[list[int]]:
        return source_map.mlir_name_map(stablehlo, names or {})

    def error_line(self, message: str, source: str) -> int | None:
        return hlo_error_line(message, input_names(source))


class StableHloPipeline(XlaPipeline):
    """StableHLO (or MHLO) MLIR text, compiled as it is."""

    key = "stablehlo"
    title = "StableHLO (XLA)"
    accepts = "StableHLO (or MHLO) MLIR text"
    editor_mode = "mlir"
    lexer = "mlir"
    extensions = (".mlir",)
    example = STABLEHLO_EXAMPLE
    stablehlo_note = "your input, compiled as is"

    def user_file(self, work: str) -> str | None:
        return "-"  # MLIR text parsed by XLA gets locations in file "-": its HLO metadata points there

    def stablehlo_map(self, stablehlo: str, user_file: str | None, names: dict[str, int] | None,
                      lines: int) -> list[list[int]]:
        return [[n, n] for n in range(1, lines + 1)]

    def compile_error_kind(self, message: str) -> ErrorKind:
        return ErrorKind.SyntaxError if "Failed to parse" in message else ErrorKind.CompileError


def module_counts(module: hlo_text.HloText) -> dict[str, int]:
    """What an HLO module holds, counted from its text: instructions (of every computation and of
    the entry one), computations, and fusion instructions (each a kernel XLA generates)."""
    entry = module.entry
    return {"instructions": sum(len(c.instructions) for c in module.computations),
            "entry_instructions": len(entry.instructions) if entry else 0,
            "computations": len(module.computations),
            "fusions": sum(1 for i in module.instructions() if i.opcode == "fusion")}


def _program_stages(bundle: Bundle, modules: list[dict[str, Any]], printed: str, on_cpu: bool = True) -> None:
    """A JAX program that called jax.jit itself: what it printed, and the index of every module it
    compiled: each of its own (in the order JAX compiled them) with its function, the lines of the
    user's that define and call it and the key of its stages, linked; then the eager operations.
    `on_cpu`: its modules' stages are from the program's own compiles (the child's CPU target),
    else irscope compiled each again for the GPU target."""
    bundle.add("run.stdout", "Program output", "Run", "text", printed)
    own = [m for m in modules if m["own"]]
    compiled = [m for m in own if not m.get("why")]
    eager: dict[str, int] = {}
    for m in modules:
        if not m["own"]:
            eager[m["module"]] = eager.get(m["module"], 0) + 1
    width = max(len(m["module"]) for m in own)
    rows, pairs = [], []
    for m in own:
        lines = ", ".join(f"{what} line {m[what]}" for what in ("defined", "called") if m.get(what))
        rows.append(f"{m['order']:>5}  {m['module']:<{width}}  {m['function']}" + (f": {lines}" if lines else "")
                    + f"; {m['lines']} lines of StableHLO; " + (m.get("why") or f"stages xla.*:{m['key']}"))
        if m.get("called") or m.get("defined"):
            pairs.append([len(rows) + 2, m.get("called") or m["defined"]])
    others = sum(eager.values())
    text = (f"{len(modules)} module{'s' if len(modules) != 1 else ''} JAX compiled while the program ran: {len(own)} "
            f"of the program's own jitted functions, in the order JAX compiled them, "
            + ("each as the program compiled it (with XLA's dump on), " if on_cpu
               else "each compiled again by irscope for the target, ")
            + "its stages in a group named after it, the line that defines it and the line that called it; "
            f"{others} operation"
            f"{'s' if others != 1 else ''} it ran eagerly.\n\n" + "\n".join(rows) + "\n")
    if eager:
        text += ("\nRun eagerly (JAX compiles each operation run outside jax.jit; no stages): "
                 + ", ".join(f"{name} ({n})" if n > 1 else name for name, n in eager.items()) + "\n")
    links = [{"file": m["key"], "stage": f"xla.optimized:{m['key']}", "stage_title": f"Optimized HLO [{m['key']}]",
              "name": f"the module JAX compiled for your function {m['function']}"
                      + (f", called on line {m['called']}" if m.get("called") else "")} for m in compiled]
    bundle.add("xla.jitted", f"Jitted functions ({len(own)})", "Input", "text", text, source_map=pairs,
               meta={"modules": modules, "file_names": links})


def _write_resources(bundle: Bundle, rows: list[Any]) -> None:
    from compiler.kernels.resources import write_resource_table
    write_resource_table(bundle, rows, "Code", note="every kernel of XLA's PTX modules, assembled by the ptxas XLA "
                                                    "used; Triton fusions are marked")


def _program_timing(result: dict[str, Any], compiled: list[dict[str, Any]],
                    timings: list[dict[str, Any]]) -> dict[str, Any]:
    """A program's compile timing: its own run (its jit compiles included), then each phase of its
    modules' compiles (the program's own on the CPU target, irscope's for a GPU target) summed over
    the modules; each module's own timing under `modules`."""
    total: dict[str, Any] = {"program_s": round(result["program_ms"] / 1e3, 3),
                             "total_ms": sum(t["total_ms"] for t in timings), "child_process_ms": result["child_ms"],
                             "child_process": result["child_started"]}
    for t in timings:
        for key, value in t.items():
            if key.endswith("_s") and isinstance(value, (int, float)):
                total[key] = total.get(key, 0) + value
    total["modules"] = [dict(t, module=r["key"]) for r, t in zip(compiled, timings)]
    modules = f"{len(timings)} module{'s' if len(timings) != 1 else ''}"
    if result.get("target", "cpu") == "cpu":  # the child captured the program's own compiles
        total["source"] = (f"the program's own run, its jit compiles included; {timings[0]['source']}, summed over "
                           f"the {modules} of its own it compiled (with XLA's dump on)")
    else:
        total["source"] = (f"the program's own run; then {timings[0]['source']}, summed over the {modules} irscope "
                           f"compiled again for their stages")
    return total


class JaxPipeline(XlaPipeline):
    """Python defining `fn` and `example_args`, run as a real file and lowered by jax.jit; or a
    program that calls jax.jit itself, run as written, each module of its own compiled for its stages."""

    key = "jax"
    title = "JAX (XLA)"
    accepts = ("Python defining `fn` and `example_args`, lowered by `jax.jit`; or a program that calls "
               "jax.jit itself, run as written, every function of its own it jits compiled")
    editor_mode = "python"
    source_markers = ("import jax", "from jax")
    example = JAX_EXAMPLE
    stablehlo_note = "jax.jit(fn).lower(*example_args).as_text(debug_info=True)"
    echoes_input = False  # the input is the editor's Python, not a module XLA received
    # A source that binds neither runs as written (user_code.runs_as_written): a program.
    convention = frozenset({"fn", "example_args"})

    def write_input(self, source: str, work: str) -> dict[str, Any]:
        path = self.user_file(work)
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        return {"user_file": path, "program": runs_as_written(source, self.convention)}

    def user_file(self, work: str) -> str | None:
        return os.path.join(work, "user_program.py")

    def error_line(self, message: str, source: str) -> int | None:
        return None  # the user's code raised, not XLA: the child named the line already
