"""The XLA compile, run in a child process of the XLA pipeline:

    python -m compiler.xla.child JOB_JSON

XLA aborts the process on some malformed input (a failed CHECK); running the compile here lets
the pipeline turn an abort into a CompileError carrying XLA's message instead of losing the
worker. JOB_JSON names the language, the source, the options and a work directory; this module
writes RESULT (`result.json` in the work directory): either the compiled module's data (for a JAX
program, every module listed and each of its own compiled: `compiled`) or
{"error": {kind, message, line}}. XLA's dump goes to `<workdir>/dump` (a program's modules each to
`<workdir>/dump/<order>`), which the pipeline parses.

XLA_FLAGS (with --xla_force_host_platform_device_count) must be set before this process starts.
"""
from __future__ import annotations

import ast
import contextlib
import copy
import json
import os
import re
import statistics
import sys
import threading
import time
import traceback
from typing import Any

from compiler.errors import ErrorKind
from compiler.xla import child_process, hlo_text, jax_variables
from compiler.xla.errors import hlo_error_line, input_names
from compiler.xla.jaxlib_hlo import hlo_bindings

RESULT = "result.json"
PHASE = "phase.txt"  # what the child was doing, for the message when XLA aborts it
_WORKDIR = "."


def phase(text: str) -> None:
    with open(os.path.join(_WORKDIR, PHASE), "w", encoding="utf-8") as f:
        f.write(text)


class ChildError(Exception):
    """`at`: "compile" for XLA's compile failing (the pipeline reads the message for its input)."""

    def __init__(self, kind: str, message: str, line: int | None = None, at: str = ""):
        super().__init__(message)
        self.kind, self.message, self.line, self.at = kind, message, line, at


def _mlir_text(bytecode_or_text: Any) -> str:
    """StableHLO bytecode -> textual MLIR (with locations), through JAX's own MLIR bindings."""
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir
    if isinstance(bytecode_or_text, str):
        return bytecode_or_text
    with jmlir.make_ir_context() as ctx:
        module = ir.Module.parse(bytecode_or_text, context=ctx)
        return module.operation.get_asm(enable_debug_info=True)


def _partition_counts(mlir: str, default_partitions: int) -> tuple[int, int]:
    parts = re.search(r"mhlo\.num_partitions\s*=\s*(\d+)", mlir)
    reps = re.search(r"mhlo\.num_replicas\s*=\s*(\d+)", mlir)
    return (int(reps.group(1)) if reps else 1, int(parts.group(1)) if parts else default_partitions)


def lower_hlo(job: dict[str, Any]) -> dict[str, Any]:
    """HLO text -> StableHLO, through XLA's own parser and jax's importer."""
    import jax.extend.mlir as jax_mlir
    hlo = hlo_bindings()
    source = job["source"]
    phase("parsing the HLO module")
    try:
        module = hlo.hlo_module_from_text(source)
    except Exception as e:  # noqa: BLE001 - XLA's parser reports through one exception type
        message = str(e)
        raise ChildError(ErrorKind.SyntaxError, message, hlo_error_line(message, input_names(source))) from None
    phase("converting the HLO module to StableHLO")
    try:
        bytecode = jax_mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    except Exception as e:  # noqa: BLE001 - the importer checks what the parser let through
        message = str(e)
        raise ChildError(ErrorKind.CompileError, message, hlo_error_line(message, input_names(source))) from None
    text = _mlir_text(bytecode)
    return {"mlir": bytecode, "stablehlo": text, "replicas": 1, "partitions": int(job["options"].get("devices", 8)),
            "shardy": False}


def lower_stablehlo(job: dict[str, Any]) -> dict[str, Any]:
    """StableHLO text is compiled as it is; its module attributes say how many partitions."""
    source = job["source"]
    replicas, partitions = _partition_counts(source, int(job["options"].get("devices", 8)))
    return {"mlir": source, "stablehlo": source, "replicas": replicas, "partitions": partitions,
            "shardy": "sdy." in source}


def _locations_name_the_users_frames() -> None:
    """JAX records the Python stack of each operation in the module (the HLO's FileNames,
    FunctionNames and StackFrames), leaving out its own frames by path (source_info_util's
    exclusions). irscope's frames (this child, and the runners through which it runs the user's
    file) are left out the same way, so the stack names what a plain `python file.py` run names."""
    from jax._src import source_info_util

    from compiler.user_code import RUNNER_FRAMES
    source_info_util.register_exclusion(os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep)
    for runner in RUNNER_FRAMES:
        source_info_util.register_exclusion(runner)


def lower_jax(job: dict[str, Any]) -> dict[str, Any]:
    """Run the user's file (a real file, so tracebacks name its lines), then jit-lower `fn`."""
    import jax
    _locations_name_the_users_frames()

    from compiler import user_code
    from compiler.model import JobSettings
    from compiler.pipeline import UserError
    settings = JobSettings.from_json(job.get("settings") or {})
    path = job["user_file"]
    if job.get("program"):  # it binds neither `fn` nor `example_args` (JaxPipeline.write_input)
        return _lower_program(job, path, settings)
    phase("running your program")
    try:
        with jax_variables.until_the_program_imports_jax():
            namespace, printed = user_code.run_user_file(path, settings)
    except UserError as e:
        raise ChildError(e.error.kind, e.error.message, e.error.line) from None
    fn, args = namespace.get("fn"), namespace.get("example_args")
    if not callable(fn):
        raise ChildError(ErrorKind.InputError, "the program must define a function named `fn`")
    if args is None:
        raise ChildError(ErrorKind.InputError, "the program must define `example_args`: a tuple of arrays or "
                                               "jax.ShapeDtypeStruct")
    if not isinstance(args, (tuple, list)):
        args = (args,)
    t0 = time.perf_counter()
    # A GPU target lowers for the cuda platform (its lowering rules, custom calls), as jax.jit would
    # on a GPU; the mesh may name the host's CPU devices, the shardings do not depend on them.
    platforms = ("cuda",) if job.get("target", "cpu") != "cpu" else None
    try:
        traced = jax.jit(fn).trace(*args)
        lowered = traced.lower(lowering_platforms=platforms) if platforms else traced.lower()
        text = lowered.as_text(debug_info=True)
    except Exception as e:  # noqa: BLE001 - tracing runs user code
        err = user_code.user_error(e, path, settings)
        raise ChildError(err.error.kind, err.error.message, err.error.line) from None
    replicas, partitions = _partition_counts(text, 1)
    return {"mlir": text, "stablehlo": text, "replicas": replicas, "partitions": partitions,
            "shardy": bool(jax.config.jax_use_shardy_partitioner), "lower_ms": (time.perf_counter() - t0) * 1e3,
            "printed": printed}


# JAX's dump of each module it hands XLA to compile (jax/_src/compiler.py: the "compile" stage).
_COMPILE_DUMP = re.compile(r"^jax_ir(\d+)_(.+)_compile\.mlir$")
PROGRAM_RUNNING = "running your program; every jax.jit compile it makes is dumped"


def _is_option_error(message: str) -> bool:
    """Whether XLA refused a compile for an option the user set (xla_options), not for the module."""
    return "No such compile option" in message or "is not a valid" in message


def _program_functions(path: str) -> dict[str, tuple[int, int, int]]:
    """Each function the user's file defines: name -> (its `def` line, its first line with
    decorators, its last line). A file Python cannot parse defines none (running it says why)."""
    functions: dict[str, tuple[int, int, int]] = {}
    try:
        tree = ast.parse(_read_text(path))
    except (SyntaxError, ValueError):
        return functions
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.setdefault(n.name, (n.lineno, min([d.lineno for d in n.decorator_list] + [n.lineno]),
                                          n.end_lineno or n.lineno))
    return functions


def _own_names(functions: dict[str, tuple[int, int, int]]) -> set[str]:
    """JAX compiles every operation run eagerly too (jit_convert_element_type, jit__normal): the
    program's own are the modules named after a function its source defines (jit_<name>)."""
    return set(functions) | {"<lambda>", "_lambda_"}


class _ProgramCompiles:
    """The CPU target's capture of a program's own modules from the program's own compiles: around
    JAX's compile entry point (jax._src.compiler.backend_compile_and_load, which
    compile_or_get_cached calls right after dumping the module as jax_ir<N>_<module>_compile.mlir),
    each of the program's own modules, up to `limit` (the program_modules setting), is compiled by the real function
    with the dump options compile_module sets (to <dump_dir>/<N>) and the user's xla_options, in a
    profiler session; its loaded executable is kept for its stages. Every other compile (the
    operations run eagerly, own modules past the bound) is the real function's, untouched.

    A compile that fails raises the program's own exception, its traceback as a plain run's: this
    file is one of the paths JAX leaves out of the tracebacks it filters, as its own are. A failure
    of the capture itself (`failure`) leaves the compile untouched and is irscope's, after the run."""

    def __init__(self, job: dict[str, Any], own: set[str], limit: int):
        """`limit`: the program's own modules captured at most, the first in JAX's order (each dumps
        every pass, and the job's time and disk are bounded): the program_modules setting."""
        self.job, self.own, self.limit = job, own, limit
        self.captured: dict[int, dict[str, Any]] = {}  # JAX's dump number -> what the compile gave
        self.option_error: str | None = None
        self.failure: str | None = None
        self._dumped = threading.local()  # the name of the module JAX dumped last in this thread

    def _options(self, options: Any) -> tuple[int, Any] | None:
        """(JAX's dump number, JAX's options with the dump's added) for a module to capture; None
        for a compile left untouched."""
        name, self._dumped.name = getattr(self._dumped, "name", None), None
        m = _COMPILE_DUMP.match(name or "")
        if m is None or m.group(2).removeprefix("jit_") not in self.own or len(self.captured) >= self.limit:
            return None
        try:
            order = int(m.group(1))
            overrides, pass_lists = _dump_overrides(self.job, os.path.join(self.job["dump_dir"], f"{order:04d}"), False)
            options = copy.deepcopy(options)  # JAX's own, built for this compile; the dump's added
            options.env_option_overrides = list(options.env_option_overrides) + list(overrides.items())
            debug = options.executable_build_options.debug_options
            for key, value in pass_lists.items():
                setattr(debug, key, value)
            phase(f"running your program; compiling {m.group(2)} (JAX's module {order}) with XLA's dump")
            return order, options
        except Exception:  # noqa: BLE001 - irscope's failure, said after the run; the compile goes on
            self.failure = self.failure or traceback.format_exc()
            return None

    def __enter__(self) -> _ProgramCompiles:
        from jax._src import compiler, traceback_util
        from jax._src.interpreters import mlir
        traceback_util.register_exclusion(__file__)
        real_dump, real_compile = mlir.dump_module_to_file, compiler.backend_compile_and_load
        self._restore = lambda: (setattr(mlir, "dump_module_to_file", real_dump),
                                 setattr(compiler, "backend_compile_and_load", real_compile))

        def dump_module_to_file(module: Any, stage_name: str) -> str | None:
            name = real_dump(module, stage_name)
            if stage_name == "compile":
                self._dumped.name = name
            return name

        def backend_compile_and_load(backend: Any, module: Any, executable_devices: Any, options: Any,
                                     host_callbacks: Any) -> Any:
            capture = self._options(options)
            if capture is None:
                return real_compile(backend, module, executable_devices, options, host_callbacks)
            order, options = capture
            session = _start_trace()
            t0 = time.perf_counter()
            try:
                exe = real_compile(backend, module, executable_devices, options, host_callbacks)
            except Exception as e:
                _stop_trace(session)
                if _is_option_error(str(e)):
                    self.option_error = self.option_error or str(e)
                raise  # the program's own compile failed: its exception is the program's
            compile_ms = (time.perf_counter() - t0) * 1e3
            self.captured[order] = {"exe": exe, "devices": list(executable_devices), "backend": backend,
                                    "compile_ms": compile_ms, "trace": _stop_trace(session)}
            phase(PROGRAM_RUNNING)
            return exe

        mlir.dump_module_to_file = dump_module_to_file
        compiler.backend_compile_and_load = backend_compile_and_load
        return self

    def __exit__(self, *exc: Any) -> None:
        self._restore()


def _lower_program(job: dict[str, Any], path: str, settings: Any) -> dict[str, Any]:
    """A program that calls jax.jit itself (it defines neither `fn` nor `example_args`): run as
    `python file.py` runs it, with JAX dumping every module it hands XLA to compile
    (jax_dump_ir_to). Every module is listed; each of the program's own (up to the program_modules
    setting) is keyed and grouped by its function, the line that defines it and the line that
    called it. On the CPU target each is captured from the program's own compile
    (_ProgramCompiles: `captured`, by JAX's dump number); for a GPU target its StableHLO is kept
    for irscope to compile for the target."""
    import jax

    from compiler import user_code
    from compiler.xla.source_map import call_site
    _locations_name_the_users_frames()
    dump = os.path.join(job["workdir"], "jax-modules")
    os.makedirs(dump, exist_ok=True)
    # name -> (its `def` line, its first line with decorators, its last line)
    functions = _program_functions(path)
    defined = _own_names(functions)
    limit = settings.program_modules
    capture = _ProgramCompiles(job, defined, limit) if job.get("target", "cpu") == "cpu" else None
    if capture is not None:
        # A persistent compilation cache hit returns an executable without compiling (no dump): off.
        # JAX decides once per process, at the first compile, so the program cannot turn it back on.
        jax.config.update("jax_enable_compilation_cache", False)
    jax.config.update("jax_dump_ir_modes", "stablehlo")
    jax.config.update("jax_dump_ir_to", dump)
    phase(PROGRAM_RUNNING)
    sink = user_code.CappedText(settings.output_bytes)
    t0 = time.perf_counter()
    with capture if capture is not None else contextlib.nullcontext(), jax_variables.until_the_program_imports_jax():
        _, error = user_code.run_as_main(path, sink, lambda e: user_code.user_error(e, path, settings))
    run_ms = (time.perf_counter() - t0) * 1e3
    jax.config.update("jax_dump_ir_to", "")
    if capture is not None and capture.failure:
        raise ChildError(ErrorKind.InternalError, "capturing the program's compiles failed:\n" + capture.failure)
    if capture is not None and capture.option_error:
        raise ChildError(ErrorKind.OptionError, capture.option_error)
    if error is not None:
        raise ChildError(error.error.kind, error.error.message, error.error.line)
    dumped = sorted((int(m.group(1)), m.group(2), name) for name in os.listdir(dump)
                    if (m := _COMPILE_DUMP.match(name)))
    own = [d for d in dumped if d[1].removeprefix("jit_") in defined]
    if not own:
        eager = ", ".join(sorted({d[1] for d in dumped})[:8])
        raise ChildError(ErrorKind.InputError, "the program ran to its end and compiled no function of its own with "
                                               "jax.jit" + (f" (JAX compiled only the operations it ran eagerly: "
                                                            f"{eager})" if eager else "")
                         + ", and it defines no `fn` and `example_args` for irscope to lower")
    texts = {name: _read_text(os.path.join(dump, name)) for _, _, name in dumped}
    # a module compiled more than once (another shape) is <module>.<n>, as a kernel's configs are
    repeats = {module: sum(1 for d in own if d[1] == module) for _, module, _ in own}
    seen: dict[str, int] = {}
    modules, lowered = [], 0
    for n, module, name in dumped:
        row: dict[str, Any] = {"order": n, "module": module, "lines": texts[name].count("\n"),
                               "own": (n, module, name) in own}
        if row["own"]:
            k = seen[module] = seen.get(module, -1) + 1
            function = module.removeprefix("jit_")
            line, first, last = functions.get(function, (None, 0, -1))
            called = call_site(texts[name], path, first, last) if line else None
            row.update(key=re.sub(r"[^\w.\-]", "_", module) + (f".{k}" if repeats[module] > 1 else ""),
                       function=function, defined=line, called=called,
                       group=module + (f" (defined line {line}, called line {called})" if called
                                       else f" (defined line {line})"))
            # the CPU target: the ones captured from the program's compiles; a GPU target: the first few
            if (n in capture.captured) if capture is not None else lowered < limit:
                row["mlir"], lowered = texts[name], lowered + 1
            elif lowered >= limit:
                row["why"] = (f"not compiled: the program compiled more than {limit} modules of its own; irscope "
                              f"compiles the first {limit} with every stage (setting program_modules)")
            else:
                row["why"] = "not compiled: the program's own compile of it did not finish"
        modules.append(row)
    result = {"program": modules, "shardy": bool(jax.config.jax_use_shardy_partitioner), "program_ms": run_ms,
              "printed": sink.getvalue()}
    if capture is not None:
        result["captured"] = capture.captured
    return result


def _program_module(lowered: dict[str, Any], module: str, mlir: str) -> dict[str, Any]:
    """One of a program's own modules (its StableHLO as JAX dumped it), as `compile_module` takes it."""
    replicas, partitions = _partition_counts(mlir, 1)
    return {"mlir": mlir, "stablehlo": mlir, "replicas": replicas, "partitions": partitions,
            "shardy": lowered["shardy"], "lower_ms": None, "module": module}


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _gpu_devices(job: dict[str, Any], count: int) -> tuple[Any, list, str | None]:
    """(client, devices, real device name) for a GPU target: the worker's own GPUs when they are the
    target's product, else compile-only devices of a virtual topology described by the target's
    GpuTargetConfigProto (jax.experimental.topologies)."""
    import jax
    from jax.experimental import topologies
    if job.get("real_gpu"):
        try:
            real = jax.devices("cuda")
        except RuntimeError:
            real = []
        if real and real[0].device_kind == job["target_product"] and len(real) >= count:
            return real[0].client, real[:count], real[0].device_kind
    with open(job["target_config"], encoding="utf-8") as f:
        config = f.read()
    phase("creating the virtual GPU topology")
    topology = topologies.get_topology_desc(platform="cuda", target_config=config,
                                            topology=f"1x1x{int(job['options'].get('devices', 8))}")
    return topology.devices[0].client, list(topology.devices), None


def _ir_module(mlir: Any) -> Any:
    """StableHLO text or bytecode -> an MLIR module in JAX's context (what a compile-only client takes)."""
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir
    context = jmlir.make_ir_context()
    return ir.Module.parse(mlir, context=context)


def _dump_overrides(job: dict[str, Any], dump_dir: str, gpu: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """(compile option overrides, DebugOptions pass lists) of a compile irscope reads: XLA's dump of
    every pass as text into `dump_dir`, then the user's xla_options (the pass lists set directly)."""
    options = job.get("options") or {}
    user_options = dict(options.get("xla_options") or {})
    pass_lists = {k: user_options.pop(k) for k in ("xla_disable_hlo_passes", "xla_enable_hlo_passes_only")
                  if k in user_options}
    overrides = {"xla_dump_to": dump_dir, "xla_dump_hlo_pass_re": ".*", "xla_dump_hlo_as_text": True,
                 "xla_dump_include_timestamp": False}
    if gpu:
        # The latency-hiding scheduler's own schedule with its estimates; with triton_ir, every MLIR
        # pass of each Triton fusion (TTIR, TTGIR, LLVM) - which makes the compile much slower.
        overrides["xla_dump_latency_hiding_schedule"] = True
        if options.get("triton_ir"):
            overrides["xla_dump_emitter_re"] = "triton"
    overrides.update(user_options)
    return overrides, pass_lists


def compile_module(job: dict[str, Any], lowered: dict[str, Any]):
    import jax.extend.backend as jax_backend
    from jaxlib import _jax
    gpu = job.get("target", "cpu") != "cpu"
    count = lowered["replicas"] * lowered["partitions"]
    if gpu:
        backend, available, lowered["real_device"] = _gpu_devices(job, count)
    else:
        backend = jax_backend.get_backend()
        available = backend.devices()
    if count > len(available):
        raise ChildError(ErrorKind.InputError, f"the module needs {count} devices (num_replicas x num_partitions) but "
                                               f"the devices option gives {len(available)}")
    devices = available[:count]
    overrides, pass_lists = _dump_overrides(job, job["dump_dir"], gpu)
    opts = jax_backend.get_compile_options(lowered["replicas"], lowered["partitions"],
                                           env_options_overrides=overrides)
    opts.executable_build_options.use_shardy_partitioner = lowered["shardy"]
    debug = opts.executable_build_options.debug_options
    for key, value in pass_lists.items():
        setattr(debug, key, value)
    phase("compiling" + (f" {lowered['module']}" if lowered.get("module") else ""))
    session = _start_trace()
    t0 = time.perf_counter()
    try:
        if gpu and lowered.get("real_device") is None:
            exe = backend.compile(_ir_module(lowered["mlir"]), executable_devices=_jax.DeviceList(tuple(devices)),
                                  compile_options=opts)
        else:
            exe = backend.compile_and_load(lowered["mlir"], _jax.DeviceList(tuple(devices)), opts)
    except Exception as e:  # noqa: BLE001 - XLA reports every compile failure as one exception type
        _stop_trace(session)
        message = str(e)
        if _is_option_error(message):
            raise ChildError(ErrorKind.OptionError, message) from None
        # The pipeline finds the line and the kind, as its input language reads XLA's message.
        raise ChildError(ErrorKind.CompileError, message, None, at="compile") from None
    compile_ms = (time.perf_counter() - t0) * 1e3
    lowered["trace"] = _stop_trace(session)
    return exe, devices, backend, compile_ms


def _start_trace() -> Any:
    """A profiler session around the compile: XLA's pass pipelines emit a TraceMe per pass,
    which gives the duration of every pass, changed or not."""
    try:
        from jax._src.lib import _profiler
        return _profiler.ProfilerSession()
    except Exception:  # noqa: BLE001 - without a profiler the pass times come from the dump files
        return None


def _stop_trace(session: Any, limit: int = 50000) -> list[list[Any]]:
    """[name, start_ns, duration_ns] of the host CPU events recorded by the compiler's threads."""
    if session is None:
        return []
    try:
        from jax._src.lib import _profile_data
        data = _profile_data.ProfileData.from_serialized_xspace(session.stop())
    except Exception:  # noqa: BLE001 - as above
        return []
    events = []
    for plane in data.planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            if line.name == "python":
                continue
            for e in line.events:
                events.append([e.name, e.start_ns, e.duration_ns])
                if len(events) >= limit:
                    return events
    return events


def per_instruction_cost(backend: Any, optimized: str, limit: int = 400) -> list[dict[str, Any]]:
    """XLA's HloCostAnalysis for each instruction of the entry computation, run on a module
    holding that one instruction (its operands become parameters; called computations come
    along verbatim). The analysis itself is XLA's; only the isolation is ours."""
    hlo = hlo_bindings()
    from jaxlib import _jax
    module = hlo_text.parse_hlo_text(optimized)
    entry = module.entry
    if entry is None:
        return []
    lines = optimized.split("\n")
    # Each computation's text and the computations it calls, so an isolated instruction brings
    # along only what it reaches (in the printed order, callees first).
    bodies: dict[str, str] = {}
    calls: dict[str, set[str]] = {}
    order = [c.name for c in module.computations if c is not entry]
    for comp in module.computations:
        if comp is entry:
            continue
        end = comp.line
        while end <= len(lines) and lines[end - 1].strip() != "}":
            end += 1
        bodies[comp.name] = "\n".join(lines[comp.line - 1: end])
    def callees(ins: hlo_text.HloInstr) -> set[str]:
        found = set()
        for key, value in ins.attrs.items():
            if key in ("calls", "to_apply", "body", "condition", "branch_computations", "true_computation",
                       "false_computation", "called_computations", "async_execution_thread"):
                found |= {t for t in re.findall(r"%?([\w.\-]+)", value) if t in bodies}
        return found
    for comp in module.computations:
        if comp is not entry:
            calls[comp.name] = set().union(*[callees(i) for i in comp.instructions]) if comp.instructions else set()

    def reached(ins: hlo_text.HloInstr) -> list[str]:
        seen, todo = set(), list(callees(ins))
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(calls.get(name, ()))
        return [bodies[n] for n in order if n in seen]
    shapes = {i.name: i.shape for i in entry.instructions}
    # Keep only the partition/replica counts: collectives are checked against them.
    counts = re.findall(r"\b(?:num_partitions|replica_count)=\d+", module.header)
    header = "HloModule cost" + "".join(", " + c for c in counts)
    out = []
    for ins in entry.instructions[:limit]:
        if ins.opcode == "parameter":
            continue
        if ins.opcode == "constant":
            # A constant's "operand" is its literal: keep the printed line as is.
            params = []
            root = "  ROOT " + re.sub(r"^\s*(ROOT\s+)?", "", lines[ins.line - 1].rstrip())
            root = re.sub(r",\s*sharding=\{[^}]*\}", "", root)
            attrs = ""
        else:
            params = [f"  p{k} = {shapes.get(o, 'f32[]')} parameter({k})" for k, o in enumerate(ins.operands)]
            attrs = ", ".join(f"{k}={v}" for k, v in ins.attrs.items() if k != "sharding")
            operands = ", ".join(f"p{k}" for k in range(len(ins.operands)))
            root = f"  ROOT {ins.name} = {ins.shape} {ins.opcode}({operands})"
        entry = "ENTRY cost_entry {\n" + "\n".join(params + [root + (", " + attrs if attrs else "")]) + "\n}"
        text = "\n\n".join([header] + reached(ins) + [entry])
        record: dict[str, Any] = {"name": ins.name, "opcode": ins.opcode, "line": ins.line}
        try:
            costs = _jax.hlo_module_cost_analysis(backend, hlo.hlo_module_from_text(text))
            record.update({"flops": costs.get("flops", 0.0), "transcendentals": costs.get("transcendentals", 0.0),
                           "bytes_accessed": costs.get("bytes accessed", 0.0)})
        except Exception as e:  # noqa: BLE001 - an instruction XLA cannot isolate keeps its row, costless
            record["error"] = str(e).split("\n")[0][:200]
        out.append(record)
    return out


def _random_array(rng: Any, shape: hlo_text.ArrayShape) -> Any:
    import ml_dtypes  # noqa: F401 - registers bf16 and friends with numpy (a jax dependency)
    dims = shape.dims
    if shape.dtype == "pred":
        return rng.integers(0, 2, size=dims).astype(bool)
    if shape.dtype.startswith(("s", "u")):
        return rng.integers(0, 8, size=dims).astype({"s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64",
                                                     "u8": "uint8", "u16": "uint16", "u32": "uint32",
                                                     "u64": "uint64"}.get(shape.dtype, "int32"))
    if shape.dtype in ("c64", "c128"):
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(
            "complex64" if shape.dtype == "c64" else "complex128")
    names = {"f16": "float16", "f32": "float32", "f64": "float64", "bf16": "bfloat16"}
    return rng.standard_normal(dims).astype(names.get(shape.dtype, "float32"))


def time_execution(exe: Any, devices: list, before_optimizations: str, repeats: int, warmup: int,
                   budget_s: float = 3.0) -> dict[str, Any]:
    """Median wall time of the compiled executable on random inputs, after warm-up."""
    import jax
    import numpy as np
    from jax._src.sharding_impls import GSPMDSharding
    module = hlo_text.parse_hlo_text(before_optimizations)
    # parameter(N) prints N where operands go.
    params = sorted((i for i in module.entry.instructions if i.opcode == "parameter"),
                    key=lambda i: int(i.operands[0]) if i.operands and i.operands[0].isdigit() else 0)
    shapes = []
    for p in params:
        leaves = hlo_text.parse_shapes(p.shape)
        if p.shape.startswith("(") or len(leaves) != 1:
            return {"skipped": "tuple-shaped parameters are not fed by the timer"}
        shapes.append(leaves[0])
    shardings = exe.get_parameter_shardings() if len(devices) > 1 else None
    rng = np.random.default_rng(0)
    host = [_random_array(rng, s) for s in shapes]
    donated = "input_output_alias" in module.header

    def make_args() -> list:
        if shardings is None:
            return [jax.device_put(x, devices[0]) for x in host]
        return [jax.device_put(x, GSPMDSharding(tuple(devices), s)) for x, s in zip(host, shardings)]

    def once(args: list) -> float:
        t0 = time.perf_counter()
        results = exe.execute_sharded(args)
        for out in results.disassemble_into_single_device_arrays():
            for shard in out:
                shard.block_until_ready()
        return (time.perf_counter() - t0) * 1e3

    args = make_args()
    started = time.perf_counter()
    for _ in range(warmup):
        once(make_args() if donated else args)
    samples = []
    for _ in range(repeats):
        samples.append(once(make_args() if donated else args))
        if time.perf_counter() - started > budget_s and len(samples) >= 3:
            break
    return {"compiled_ms": statistics.median(samples), "spread_ms": max(samples) - min(samples),
            "min_ms": min(samples), "max_ms": max(samples), "repeats": len(samples), "warmup": warmup,
            "where": f"host CPU, {len(devices)} virtual XLA device{'s' if len(devices) != 1 else ''}",
            "inputs": "random (seed 0): standard normal floats, integers in [0, 8)"}


# How each input language reaches StableHLO (the key is the pipeline's).
LOWERINGS = {"hlo": lower_hlo, "stablehlo": lower_stablehlo, "jax": lower_jax}


def _compiled(job: dict[str, Any], lowered: dict[str, Any]) -> dict[str, Any]:
    """One module compiled (its dump in job["dump_dir"]) and what the pipeline reads of it: the
    optimized module, memory, cost, shardings, the graph; its run timed where job["run"] asks."""
    exe, devices, backend, compile_ms = compile_module(job, lowered)
    return _executable_result(job, lowered, exe, devices, backend, compile_ms)


def _executable_result(job: dict[str, Any], lowered: dict[str, Any], exe: Any, devices: list, backend: Any,
                       compile_ms: float) -> dict[str, Any]:
    """What the pipeline reads of a compiled module's loaded executable (compiled by irscope, or by a
    program on the CPU target), its dump in job["dump_dir"]: the optimized module, memory, cost,
    shardings, the graph, the compile's trace (lowered["trace"]); its run timed where job["run"] asks."""
    import jax.extend.backend as jax_backend
    hlo = hlo_bindings()
    module = exe.hlo_modules()[0]
    optimized = module.to_string()
    stats = exe.get_compiled_memory_stats()
    memory = {k: getattr(stats, k) for k in dir(stats) if k.endswith("_in_bytes") and not k.startswith("_")
              and isinstance(getattr(stats, k), int)}
    gpu = job.get("target", "cpu") != "cpu"
    if gpu and lowered.get("real_device") is None:
        cost_total = None  # a compile-only executable answers "GetCostAnalysis is not supported"
    else:
        cost_total = dict(exe.cost_analysis() or {})
    # HloCostAnalysis needs a PjRt client: the host CPU's for a compile-only GPU executable
    cost_client = jax_backend.get_backend("cpu") if gpu else backend
    shardings = {
        "parameters": [str(hlo.HloSharding.from_proto(s)) for s in exe.get_parameter_shardings() or []],
        "outputs": [str(hlo.HloSharding.from_proto(s)) for s in exe.get_output_shardings() or []],
    }
    result: dict[str, Any] = {
        "stablehlo": lowered["stablehlo"], "optimized": optimized, "memory": memory,
        "cost_total": cost_total, "cost": per_instruction_cost(cost_client, optimized),
        "target": job.get("target", "cpu"), "real_device": lowered.get("real_device"),
        "shardings": shardings, "devices": len(devices), "replicas": lowered["replicas"],
        "partitions": lowered["partitions"], "shardy": lowered["shardy"], "compile_ms": compile_ms,
        "lower_ms": lowered.get("lower_ms"), "printed": lowered.get("printed", ""),
        "trace": lowered.get("trace", []),
        "dot": hlo.hlo_module_to_dot_graph(module), "hlo_bindings": hlo.__name__,
    }
    before = [f for f in os.listdir(job["dump_dir"]) if f.endswith(".before_optimizations.txt")]
    if job.get("run", True) and before and not gpu:
        with open(os.path.join(job["dump_dir"], sorted(before)[-1]), encoding="utf-8") as f:
            before_text = f.read()
        phase("running the compiled executable")
        try:
            result["run"] = time_execution(exe, devices, before_text, int(job.get("repeats", 20)),
                                           int(job.get("warmup", 3)))
        except Exception as e:  # noqa: BLE001 - a failed timing run must not lose the compile
            result["run"] = {"skipped": f"{type(e).__name__}: {e}"[:500]}
    return result


def _compile_program(job: dict[str, Any], lowered: dict[str, Any]) -> dict[str, Any]:
    """Each of a program's own modules, each with its dump in its own directory (<dump_dir>/<order>):
    on the CPU target the executable the program's own compile made (lowered["captured"]), for a
    GPU target compiled in turn in this process from its StableHLO; the first is the one timed. A
    module XLA fails to compile again keeps its row with XLA's message; none compiling is the job's
    error."""
    compiled: list[dict[str, Any]] = []
    first_error: ChildError | None = None
    captured = lowered.get("captured")
    for row in lowered["program"]:
        mlir = row.pop("mlir", None)
        if mlir is None:
            continue
        dump = f"{row['order']:04d}"
        module_job = dict(job, dump_dir=os.path.join(job["dump_dir"], dump), run=job.get("run", True) and not compiled)
        module = _program_module(lowered, row["module"], mlir)
        try:
            if captured is not None:  # the CPU target: the program's own compile, its dump on
                got = captured[row["order"]]
                module["trace"] = got["trace"]
                result = _executable_result(module_job, module, got["exe"], got["devices"], got["backend"],
                                            got["compile_ms"])
            else:
                result = _compiled(module_job, module)
        except ChildError as e:
            row["why"] = "not compiled: " + (e.message.strip().split("\n")[0][:300] or e.kind)
            first_error = first_error or e
            continue
        compiled.append(dict(result, key=row["key"], group=row["group"], dump=dump))
    if not compiled:
        raise first_error or ChildError(ErrorKind.InternalError, "no module of the program was compiled")
    return {"modules": lowered["program"], "compiled": compiled, "printed": lowered["printed"],
            "program_ms": lowered["program_ms"], "target": job.get("target", "cpu"),
            "devices": compiled[0]["devices"], "real_device": compiled[0]["real_device"]}


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as f:
        job = json.load(f)
    global _WORKDIR
    _WORKDIR = job["workdir"]
    result_path = os.path.join(job["workdir"], RESULT)
    try:
        lowered = LOWERINGS[job["language"]](job)
        result = _compile_program(job, lowered) if "program" in lowered else _compiled(job, lowered)
    except ChildError as e:
        result = {"error": {"kind": e.kind, "message": e.message[:8000], "line": e.line, "at": e.at}}
    except Exception:  # noqa: BLE001 - reported to the pipeline as an internal failure
        result = {"error": {"kind": ErrorKind.InternalError, "message": traceback.format_exc()[-4000:], "line": None}}
    tmp = result_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f)
    os.replace(tmp, result_path)
    return 0


def import_ahead() -> None:
    """What every job's child imports, for a child started ahead of its job (child_process): jax and
    the modules of it this child reads, the HLO bindings and irscope's own modules it uses. Only
    the toolchain decides what they are; no backend starts."""
    import jax  # noqa: F401
    import jax.experimental.topologies  # noqa: F401
    import jax.extend.backend  # noqa: F401
    import jax.extend.mlir  # noqa: F401
    import jax.numpy  # noqa: F401
    from jax._src import compiler, source_info_util, traceback_util  # noqa: F401
    from jax._src.interpreters import mlir  # noqa: F401
    from jax._src.lib.mlir import ir  # noqa: F401

    from compiler import user_code  # noqa: F401
    from compiler.xla import source_map  # noqa: F401
    hlo_bindings()


if __name__ == "__main__":
    if sys.argv[1:] == [child_process.WAIT_FLAG]:
        import_ahead()
        job_path = child_process.wait_for_job()
        sys.exit(main([sys.argv[0], job_path]) if job_path else 0)
    sys.exit(main(sys.argv))
