"""The `triton` language: `@triton.jit` kernels plus the Python that allocates tensors and launches them.

On a host without the chosen GPU the program runs under a FakeTensorMode with Triton's
compile-only driver (compiler/targets/virtual_gpu.py): each `kernel[grid](...)` compiles the kernel
for the target and is recorded (grid, argument types, constexprs), never executed. With a real CUDA
device that matches the target, the program runs for real and each launch is timed with
`triton.testing.do_bench`.

Every compilation is captured from Triton itself, through two public hooks in `triton.knobs`:
`runtime.add_stages_inspection_hook` wraps each lowering stage (to note which bytes of the
`MLIR_ENABLE_DUMP=1` per-pass dump file each stage wrote, to keep the module after the
stage's last pass, and to keep ptxas's `-v` log), and `compilation.listener` hands over the files
Triton wrote to its cache and the per-stage compile times. `KernelCapture` and `write_kernel_stages`
are shared with the Inductor-on-a-virtual-GPU path (compiler/pytorch/gpu_codegen.py).

Stage keys, per compiled kernel: `triton.<stage>:<kernel>`; a kernel compiled more than once (other
argument specialisations, autotune configs) gets `:<kernel>.<n>`, n counting compilations from 0.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from compiler.triton import gpu_lines, mlir_passes
from compiler.model import Request
from compiler.pipeline import Bundle, Option, Pipeline, UserError
from compiler.targets import DEFAULT_VIRTUAL_TARGET, TARGETS, GpuTarget, get_target

# Triton's stages that run MLIR pass managers, in order; their per-pass dumps make `triton.passes`.
MLIR_STAGES = ("ttir", "ttgir", "llir")
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


# --------------------------------------------------------------------------------------------
# Capture of every Triton compilation in the process


@dataclass
class CompiledRecord:
    """One Triton compilation, as Triton itself reported it."""

    hash: str
    name: str = ""
    dump_paths: dict[str, str] = field(default_factory=dict)  # stage -> its MLIR per-pass dumps
    final_ir: dict[str, str] = field(default_factory=dict)  # stage -> module after its last pass
    ptxas_log: str = ""
    files: dict[str, str] = field(default_factory=dict)  # Triton's cache files: "add_kernel.ptx" -> path
    metadata: dict[str, Any] = field(default_factory=dict)
    times_us: dict[str, int] = field(default_factory=dict)
    source: str = ""  # the kernel's Python source (decorators stripped, as Triton parsed it)
    source_file: str = ""  # the file Triton's locations name
    def_line: int = 0  # the `def` line in that file
    constants: dict[str, Any] = field(default_factory=dict)
    signature: dict[str, str] = field(default_factory=dict)
    complete: bool = False

    def asm(self, ext: str) -> str | bytes | None:
        """A stage's output as Triton stored it (text, or bytes for cubin/hsaco)."""
        path = next((p for f, p in self.files.items() if f.endswith("." + ext)), None)
        if path is None or not os.path.exists(path):
            return None
        mode = "rb" if ext in ("cubin", "hsaco") else "r"
        with open(path, mode) as f:
            return f.read()


class KernelCapture:
    """Installs Triton's stage-inspection hook and compilation listener for the duration; each
    compilation becomes a CompiledRecord, in compilation order."""

    def __init__(self, dump_dir: str):
        self.dump_dir = dump_dir
        self.records: dict[str, CompiledRecord] = {}
        os.makedirs(dump_dir, exist_ok=True)
        # Triton prints the dumps to llvm::dbgs() (unbuffered stderr) unless MLIR_DUMP_PATH names a
        # file, which it opens once per process and buffers, so stage boundaries would blur.
        os.environ.pop("MLIR_DUMP_PATH", None)
        os.environ["MLIR_ENABLE_DUMP"] = "1"

    def ordered(self) -> list[CompiledRecord]:
        return [r for r in self.records.values() if r.complete]

    def _record(self, metadata: dict[str, Any]) -> CompiledRecord:
        h = str(metadata.get("hash", ""))
        if h not in self.records:
            self.records[h] = CompiledRecord(hash=h, name=str(metadata.get("name", "")))
        return self.records[h]

    def _wrap_stage(self, ext: str, stage_fn: Callable[[Any, dict], Any]) -> Callable[[Any, dict], Any]:
        def run_stage(src: Any, metadata: dict) -> Any:
            record = self._record(metadata)
            if ext in MLIR_STAGES:
                path = os.path.join(self.dump_dir, f"{record.hash[:16]}.{ext}.passes.mlir")
                record.dump_paths[ext] = path
                with _stderr_to(path) as failed:
                    try:
                        result = stage_fn(src, metadata)
                    except BaseException:
                        failed.append(True)
                        raise
                # ttir/ttgir return the module they ran on; llir translates `src` to LLVM after its
                # pass manager ran on it in place, so `src` now holds the last MLIR of the stage.
                final = src if ext == "llir" else result
                record.final_ir[ext] = str(final)
                return result
            if ext == "cubin":
                from triton import knobs
                log = io.StringIO()
                previous = knobs.nvidia.dump_ptxas_log
                knobs.nvidia.dump_ptxas_log = True  # Triton prints ptxas -v's log; keep it
                try:
                    with contextlib.redirect_stdout(log):
                        result = stage_fn(src, metadata)
                finally:
                    knobs.nvidia.dump_ptxas_log = previous
                record.ptxas_log = log.getvalue()
                return result
            return stage_fn(src, metadata)
        return run_stage

    def _stages_hook(self, *args: Any) -> Any:
        if not args:  # asked for the (cache key, hash) this hook adds to the kernel's key
            return "irscope-capture", "irscope-capture"
        _backend, stages, _options, _language, _capability = args
        for ext in list(stages):
            stages[ext] = self._wrap_stage(ext, stages[ext])
        return None

    def _listener(self, *, src: Any, metadata: dict, metadata_group: dict, times: Any, cache_hit: bool) -> None:
        record = self._record(metadata)
        record.name = str(metadata.get("name", record.name))
        record.files = dict(metadata_group)
        record.metadata = {k: v for k, v in metadata.items()}
        record.times_us = {"ir_initialization": times.ir_initialization,
                           **{stage: us for stage, us in times.lowering_stages}, "store_results": times.store_results}
        fn = getattr(src, "fn", None)
        if fn is not None:
            record.source = getattr(fn, "src", "")
            record.source_file = getattr(fn, "file_name", "")
            record.def_line = int(getattr(fn, "def_file_line_number", 0) or 0)
        record.signature = {str(k): str(v) for k, v in (getattr(src, "signature", None) or {}).items()}
        names = list(record.signature)
        # constexpr keys are index paths into the argument list: (4,) is the fifth parameter
        record.constants = {_path_name(k, names): _plain(v) for k, v in (getattr(src, "constants", None) or {}).items()}
        record.complete = True

    @contextlib.contextmanager
    def installed(self) -> Iterator["KernelCapture"]:
        from triton import knobs
        saved = (knobs.runtime.add_stages_inspection_hook, knobs.compilation.listener)
        knobs.runtime.add_stages_inspection_hook = self._stages_hook
        knobs.compilation.listener = self._listener
        try:
            yield self
        finally:
            knobs.runtime.add_stages_inspection_hook, knobs.compilation.listener = saved


@contextlib.contextmanager
def _stderr_to(path: str) -> Iterator[list[bool]]:
    """Send file descriptor 2 (where Triton's C++ prints the pass dumps) to `path` for the
    duration; Python's own stderr is parked meanwhile so no warning lands between two dumps. If the
    stage fails, what C++ printed that is not a dump (diagnostics) is copied back to stderr."""
    failed: list[bool] = []
    sys.stderr.flush()
    saved_fd = os.dup(2)
    saved_py = sys.stderr
    parked = io.StringIO()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stderr = parked
    try:
        yield failed
    finally:
        sys.stderr = saved_py
        os.dup2(saved_fd, 2)
        os.close(saved_fd)
        if parked.getvalue():
            sys.stderr.write(parked.getvalue())
        if failed:
            with open(path, encoding="utf-8", errors="replace") as f:
                leftover = [ln for ln in f if not ln.startswith(("//", "#", " ", "module", "}"))]
            sys.stderr.write("".join(leftover[-200:]))


def _path_name(path: Any, names: list[str]) -> str:
    if isinstance(path, tuple) and path and isinstance(path[0], int) and path[0] < len(names):
        return ".".join([names[path[0]], *map(str, path[1:])])
    return ".".join(map(str, path)) if isinstance(path, tuple) else str(path)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _plain(value: Any) -> Any:
    """A JSON-friendly spelling of a constexpr value."""
    value = getattr(value, "value", value)
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return str(value)


def qualifiers(records: list[CompiledRecord], always_number: bool = False) -> list[str]:
    """Stage qualifiers: the kernel name, with `.<n>` when the kernel was compiled more than once
    (or always, for autotune configs)."""
    totals: dict[str, int] = {}
    for r in records:
        totals[r.name] = totals.get(r.name, 0) + 1
    seen: dict[str, int] = {}
    out = []
    for r in records:
        n = seen.get(r.name, 0)
        seen[r.name] = n + 1
        out.append(f"{r.name}.{n}" if always_number or totals[r.name] > 1 else r.name)
    return out


# --------------------------------------------------------------------------------------------
# Bundled NVIDIA tools


def _nvidia_tool(name: str) -> str:
    from triton import knobs
    return getattr(knobs.nvidia, name).path


def disassemble_sass(cubin: bytes, workdir: str) -> str:
    """nvdisasm's listing of a cubin, with its line info (`//## File ..., line N`)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", dir=workdir, delete=False) as f:
        f.write(cubin)
        path = f.name
    try:
        done = subprocess.run([_nvidia_tool("nvdisasm"), "--print-line-info", "--print-code", path],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            # nvdisasm does not know every arch its ptxas can target; cuobjdump is the fallback
            done = subprocess.run([_nvidia_tool("cuobjdump"), "-sass", path], capture_output=True, text=True,
                                  timeout=120)
        return done.stdout if done.returncode == 0 else f"// disassembly failed:\n{done.stderr}"
    finally:
        os.remove(path)


def cubin_resource_usage(cubin: bytes, workdir: str) -> dict[str, int]:
    """`cuobjdump --dump-resource-usage`: REG, SHARED, LOCAL, STACK, ... of the kernel function."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", dir=workdir, delete=False) as f:
        f.write(cubin)
        path = f.name
    try:
        done = subprocess.run([_nvidia_tool("cuobjdump"), "--dump-resource-usage", path], capture_output=True,
                              text=True, timeout=60)
    finally:
        os.remove(path)
    usage: dict[str, int] = {}
    for line in done.stdout.splitlines():
        if "REG:" in line:
            for key, value in re.findall(r"([A-Z_]+(?:\[\d+\])?):(\d+)", line):
                usage[key] = int(value)
    return usage


def _first_ints(patterns: dict[str, str], text: str) -> dict[str, int]:
    """name -> the integer the first match of its pattern captures, for the patterns that match."""
    found = {key: re.search(pattern, text) for key, pattern in patterns.items()}
    return {key: int(m.group(1)) for key, m in found.items() if m}


def parse_ptxas_log(log: str) -> dict[str, int]:
    """Registers, barriers, spills, stack from ptxas -v's `ptxas info` lines."""
    patterns = {"registers": r"Used (\d+) registers", "barriers": r"used (\d+) barriers",
                "spill_stores_bytes": r"(\d+) bytes spill stores", "spill_loads_bytes": r"(\d+) bytes spill loads",
                "stack_frame_bytes": r"(\d+) bytes stack frame", "shared_bytes_static": r"(\d+) bytes smem"}
    return _first_ints(patterns, log)


def parse_amdgcn_usage(asm: str) -> dict[str, int]:
    """Register counts, spills, scratch, LDS and occupancy from the AMDGCN listing's metadata."""
    patterns = {"sgpr_count": r"\.sgpr_count:\s+(\d+)", "vgpr_count": r"\.vgpr_count:\s+(\d+)",
                "agpr_count": r"\.agpr_count:\s+(\d+)", "sgpr_spill_count": r"\.sgpr_spill_count:\s+(\d+)",
                "vgpr_spill_count": r"\.vgpr_spill_count:\s+(\d+)",
                "private_segment_bytes": r"\.private_segment_fixed_size:\s+(\d+)",
                "lds_bytes": r"\.group_segment_fixed_size:\s+(\d+)", "occupancy_waves": r";\s*Occupancy:\s+(\d+)"}
    return _first_ints(patterns, asm)


# --------------------------------------------------------------------------------------------
# Stages of one compiled kernel


def write_kernel_stages(bundle: Bundle, record: CompiledRecord, qualifier: str, workdir: str,
                        source_map_file: str, python_source: tuple[str, int] | None = None,
                        map_to_user: Callable[[int], int | None] | None = None,
                        extra_meta: dict[str, Any] | None = None, group: str = "Triton") -> None:
    """Write `triton.source/ttir/ttgir/llir/ptx|amdgcn/sass/passes/metadata:<qualifier>`.

    `source_map_file` is the file the compiler's locations must name for a line to be mapped.
    `python_source` is (text, first line in that file) for `triton.source`. `map_to_user` turns a
    line of that file into a line of the user's pasted source (identity when it is that source);
    lines it returns None for stay unmapped.
    """
    to_user = map_to_user or (lambda line: line)

    def user_map(pairs: gpu_lines.SourceMap) -> gpu_lines.SourceMap:
        out = []
        for artifact_line, line in pairs:
            mapped = to_user(line)
            if mapped:
                out.append([artifact_line, mapped])
        return out

    base_meta = {"kernel": record.name, "hash": record.hash, "target": _target_name(record.metadata.get("target")),
                 **(extra_meta or {})}

    if python_source is not None:
        text, first = python_source
        pairs = [[i, first + i - 1] for i in range(1, len(text.splitlines()) + 1)]
        bundle.add(f"triton.source:{qualifier}", f"Kernel source {qualifier}", group, "python", text,
                   source_map=user_map(pairs), meta=base_meta)

    for ext, title in (("ttir", "TTIR"), ("ttgir", "TTGIR")):
        text = record.asm(ext)
        if isinstance(text, str):
            bundle.add(f"triton.{ext}:{qualifier}", f"{title} {qualifier}", group, "mlir", text,
                       source_map=user_map(gpu_lines.mlir_source_map(text, source_map_file)), meta=base_meta)
    llir = record.asm("llir")
    llir_lines: set[int] = set()
    if isinstance(llir, str):
        llir_map = gpu_lines.llvm_source_map(llir, source_map_file)
        llir_lines = gpu_lines.source_lines(llir_map)
        bundle.add(f"triton.llir:{qualifier}", f"LLVM IR {qualifier}", group, "llvm", llir,
                   source_map=user_map(llir_map), meta=base_meta)
    ptx = record.asm("ptx")
    if isinstance(ptx, str):
        bundle.add(f"triton.ptx:{qualifier}", f"PTX {qualifier}", group, "ptx", ptx,
                   source_map=user_map(gpu_lines.ptx_source_map(ptx, source_map_file)),
                   meta={**base_meta, "ptx_target": _first(r"^\.target\s+(\S+)", ptx),
                         "ptx_version": _first(r"^\.version\s+(\S+)", ptx),
                         "note": "inside inline asm the .loc before the block is used: LLVM numbers "
                                 "inline-asm lines as if they were source lines"})
    amdgcn = record.asm("amdgcn")
    if isinstance(amdgcn, str):
        bundle.add(f"triton.amdgcn:{qualifier}", f"AMDGCN {qualifier}", group, "amdgcn", amdgcn,
                   source_map=user_map(gpu_lines.ptx_source_map(amdgcn, source_map_file)), meta=base_meta)

    cubin = record.asm("cubin")
    usage: dict[str, int] = {}
    if isinstance(cubin, bytes):
        sass = disassemble_sass(cubin, workdir)
        bundle.add(f"triton.sass:{qualifier}", f"SASS {qualifier}", group, "sass", sass,
                   source_map=user_map(gpu_lines.sass_source_map(
                       sass, source_map_file, llir_lines or None,
                       gpu_lines.ptx_inline_asm_lines(ptx, source_map_file) if isinstance(ptx, str) else None)),
                   meta={**base_meta, "tool": "nvdisasm --print-line-info --print-code (Triton's bundled copy)",
                         "note": "LLVM numbers inline-asm lines as source lines and ptxas keeps them, so "
                                 "nvdisasm may name a line below the real one (past the kernel's end even); "
                                 "such lines are mapped back through the PTX's inline-asm blocks where that is "
                                 "unambiguous, else left unmapped"})
        usage = cubin_resource_usage(cubin, workdir)

    stages = []
    for ext in MLIR_STAGES:
        path = record.dump_paths.get(ext)
        if path and os.path.exists(path) and ext in record.final_ir:
            with open(path, encoding="utf-8", errors="replace") as f:
                stages.append((ext, f.read(), record.final_ir[ext]))
    records = mlir_passes.pass_records(stages)
    if records:
        summary = [{"index": r.index, "stage": r.stage, "name": r.name, "argument": r.argument, "op": r.op,
                    "changed": r.changed, "only_locations": r.only_locations, "added": r.added,
                    "removed": r.removed} for r in records]
        bundle.add(f"triton.passes:{qualifier}", f"MLIR passes {qualifier}", group, "diff",
                   mlir_passes.render_pass_log(records),
                   meta={**base_meta, "passes": summary, "count": len(records),
                         "changed": sum(1 for r in records if r.changed),
                         "source": "MLIR_ENABLE_DUMP=1 per-pass dumps (IR before each pass); the IR after a "
                                   "stage's last pass is the module Triton kept; diffs drop loc() attributes"})

    md = record.metadata
    metadata = {
        "kernel": record.name, "target": base_meta["target"], "hash": record.hash,
        "num_warps": md.get("num_warps"), "num_stages": md.get("num_stages"), "num_ctas": md.get("num_ctas"),
        "warp_size": md.get("warp_size"),
        # Triton's dynamic shared-memory request at launch; cuobjdump's SHARED below is the cubin's
        # static shared memory (on sm_90+ it includes the 1 KiB the driver reserves)
        "shared_memory_bytes": md.get("shared"),
        "tmem_size": md.get("tmem_size"), "global_scratch_size": md.get("global_scratch_size"),
        "constexprs": record.constants, "signature": record.signature,
        "compile_times_ms": {k: round(v / 1000.0, 3) for k, v in record.times_us.items()},
        "compile_total_ms": round(sum(record.times_us.values()) / 1000.0, 3),
    }
    if usage or record.ptxas_log:
        metadata["cubin_resource_usage"] = usage  # cuobjdump --dump-resource-usage
        metadata["ptxas"] = parse_ptxas_log(record.ptxas_log)
        metadata["ptxas_log"] = record.ptxas_log.strip()
        metadata["registers"] = usage.get("REG", metadata["ptxas"].get("registers"))
        metadata["spill_stores_bytes"] = metadata["ptxas"].get("spill_stores_bytes")
        metadata["spill_loads_bytes"] = metadata["ptxas"].get("spill_loads_bytes")
    if isinstance(amdgcn, str):
        metadata["amdgcn_usage"] = parse_amdgcn_usage(amdgcn)
        metadata["registers"] = metadata["amdgcn_usage"].get("vgpr_count")
    metadata.update({k: v for k, v in (extra_meta or {}).items() if k not in metadata})
    bundle.add(f"triton.metadata:{qualifier}", f"Metadata {qualifier}", group, "json",
               json.dumps(metadata, indent=2, default=str), meta=base_meta)


def _target_name(target: Any) -> str:
    """'cuda:sm_90' / 'hip:gfx942' from Triton's GPUTarget (or its dict form)."""
    if isinstance(target, dict):
        backend, arch = target.get("backend"), target.get("arch")
    else:
        backend, arch = getattr(target, "backend", None), getattr(target, "arch", None)
    return f"cuda:sm_{arch}" if backend == "cuda" else f"{backend}:{arch}"


def _first(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text, re.M)
    return m.group(1) if m else None


# --------------------------------------------------------------------------------------------
# Launches


@dataclass
class Launch:
    kernel: str
    grid: list[int]
    compile_hash: str
    arguments: list[dict[str, Any]]
    line: int | None  # the user's line that launched it
    timing_ms: dict[str, float] | None = None
    note: str = ""


def _describe_arg(value: Any) -> dict[str, Any]:
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dtype"):
        return {"kind": "tensor", "dtype": str(value.dtype).replace("torch.", ""), "shape": list(shape),
                "stride": list(value.stride()) if hasattr(value, "stride") else None,
                "device": str(getattr(value, "device", ""))}
    if isinstance(value, (bool, int, float, str)) or value is None:
        return {"kind": type(value).__name__, "value": value}
    return {"kind": type(value).__name__, "value": str(value)[:200]}


def _launch_line(path: str) -> int | None:
    frame = sys._getframe(1)
    line = None
    while frame is not None:
        if frame.f_code.co_filename == path:
            line = frame.f_lineno
            break
        frame = frame.f_back
    return line


class LaunchRecorder:
    """Wraps `JITFunction.run` (what `kernel[grid](...)` calls). Compile-only: every launch becomes a
    warm-up (compile, no launch) and is recorded. Real device: the launch runs, then is timed with
    triton.testing.do_bench (median and 20th/80th percentiles, ms)."""

    def __init__(self, user_path: str, execute: bool):
        self.user_path = user_path
        self.execute = execute
        self.launches: list[Launch] = []
        self.seen: list[Any] = []  # every JITFunction run, launched or warmed up
        self._benchmarking = 0

    @contextlib.contextmanager
    def installed(self) -> Iterator["LaunchRecorder"]:
        from triton.runtime import autotuner
        from triton.runtime.jit import JITFunction
        original_run = JITFunction.run
        original_bench = autotuner.Autotuner._bench
        recorder = self

        def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            if self not in recorder.seen:
                recorder.seen.append(self)
            if warmup or recorder._benchmarking:
                return original_run(self, *args, grid=grid, warmup=warmup or not recorder.execute, **kwargs)
            kernel = original_run(self, *args, grid=grid, warmup=not recorder.execute, **kwargs)
            recorder._record(self, kernel, args, kwargs, grid,
                             lambda: original_run(self, *args, grid=grid, warmup=False, **kwargs))
            return kernel

        def bench(self: Any, *args: Any, config: Any, **meta: Any) -> Any:
            if recorder.execute:
                recorder._benchmarking += 1
                try:
                    return original_bench(self, *args, config=config, **meta)
                finally:
                    recorder._benchmarking -= 1
            # virtual target: compile the config, measure nothing; equal scores keep the first
            current = dict(meta, **config.all_kwargs())
            current["warmup"] = True
            self.fn.run(*args, **current)
            return [0.0, 0.0, 0.0]

        JITFunction.run = run
        autotuner.Autotuner._bench = bench
        try:
            yield self
        finally:
            JITFunction.run = original_run
            autotuner.Autotuner._bench = original_bench

    def _record(self, fn: Any, kernel: Any, args: tuple, kwargs: dict, grid: Any, relaunch: Callable[[], Any]) -> None:
        params = list(fn.signature.parameters)
        bound = fn.signature.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in params})
        bound.apply_defaults()
        meta = dict(bound.arguments)
        resolved = grid(meta) if callable(grid) else grid
        resolved = [int(g) for g in (tuple(resolved) + (1, 1, 1))[:3]]
        constexpr_names = {p.name for p in fn.params if p.is_constexpr}
        arguments = []
        for name in params:
            if name not in meta:
                continue
            entry = {"name": name, "constexpr": name in constexpr_names, **_describe_arg(meta[name])}
            arguments.append(entry)
        for name, value in kwargs.items():
            if name not in params and name not in ("debug", "instrumentation_mode", "fpsan_homomorphic_casts"):
                arguments.append({"name": name, "option": True, **_describe_arg(value)})
        launch = Launch(kernel=fn.__name__, grid=resolved, compile_hash=str(getattr(kernel, "hash", "")),
                        arguments=arguments, line=_launch_line(self.user_path))
        if self.execute:
            import triton.testing
            median, p20, p80 = triton.testing.do_bench(relaunch, quantiles=[0.5, 0.2, 0.8])
            launch.timing_ms = {"median": median, "p20": p20, "p80": p80}
            launch.note = "timed by re-running the launch with triton.testing.do_bench"
        else:
            launch.note = "virtual target: compiled, not executed"
        self.launches.append(launch)


# --------------------------------------------------------------------------------------------
# The pipeline


def _target_help() -> str:
    return ("GPU to compile for. auto: this worker's CUDA device if it has one, else cuda:sm_90. "
            "A target this worker does not have is virtual: kernels are compiled, nothing runs.")


class TritonPipeline(Pipeline):
    key = "triton"
    title = "Triton"
    editor_mode = "python"
    toolchain_packages = ("triton", "torch")
    example = EXAMPLE
    options = (
        Option("target", "choice", "auto", _target_help(), choices=("auto", *TARGETS)),
    )
    _launched: list[Any] = []  # the JITFunctions the failing run had reached (for compile errors)

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
            "IRSCOPE_WORKDIR": workdir,
        }

    def run(self, request: Request, bundle: Bundle) -> None:
        from compiler import user_code
        workdir = user_code.workdir()
        path = user_code.write_user_file(request.source, SOURCE_NAME)
        try:
            compile(request.source, path, "exec")
        except SyntaxError as e:
            raise UserError("SyntaxError", f"line {e.lineno}: {e.msg}", e.lineno) from None

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
        target_info = describe_target(target, execute, real)
        bundle.timing("target", target_info)

        capture = KernelCapture(os.path.join(workdir, "mlir-passes"))
        recorder = LaunchRecorder(path, execute)
        sink = user_code.CappedText(user_code.output_limit())
        error: UserError | None = None
        namespace: dict[str, Any] = {}
        with contextlib.ExitStack() as stack:
            if not execute:
                virtual_gpu.install_compile_only_triton(target)
                from torch._subclasses.fake_tensor import FakeTensorMode
                stack.enter_context(FakeTensorMode(allow_non_fake_inputs=True))
                # Triton reads data_ptr() for alignment; a fake tensor answers 0 (aligned) with a warning
                warnings.filterwarnings("ignore", message="Accessing the data pointer of FakeTensor")
            stack.enter_context(capture.installed())
            stack.enter_context(recorder.installed())
            try:
                with user_code.captured_stdout(sink):
                    import runpy
                    namespace = runpy.run_path(path, run_name="__main__")
            except SystemExit as e:
                if e.code not in (None, 0):
                    error = UserError("UserCodeError", f"the program called exit({e.code})", None)
            except BaseException as e:  # noqa: BLE001 - every failure of user code becomes a job error
                if isinstance(e, KeyboardInterrupt):
                    raise
                self._launched = recorder.seen
                error = self._error(e, path, execute)
        del torch

        self._write_stages(bundle, capture, recorder, path, workdir, target_info)
        output = sink.getvalue()
        bundle.add("run.stdout", "Program output", "Run", "text", output,
                   meta={"target": target.name, "executed": execute})
        if error is not None:
            raise error
        if not capture.ordered():
            raise UserError("InputError", "the program compiled no Triton kernel: launch one with kernel[grid](...) "
                            "or compile one with kernel.warmup(...)", None)
        del namespace

    def _error(self, exc: BaseException, path: str, execute: bool) -> UserError:
        from compiler import user_code
        from triton.compiler.errors import CompilationError
        # Triton's compile errors point into the kernel's own source; turn that into the file's line
        current: BaseException | None = exc
        while current is not None:
            if isinstance(current, CompilationError):
                line = self._compile_error_line(current, path)
                return UserError("CompileError", f"line {line}: {current}" if line else str(current), line)
            current = current.__cause__ or current.__context__
        error = user_code.user_error(exc, path)
        message = f"{type(exc).__name__}: {exc}"
        if not execute and re.search(r"DataDependent|data-dependent|not linked with support for cuda|"
                                     r"FakeTensor|Cannot access data pointer|item\(\)", message):
            error = UserError(error.error.kind, error.error.message + "\n(on a virtual target tensors are fake: "
                              "shapes and dtypes only, no values; nothing ran, so results cannot be read or "
                              "printed. Kernels compiled before this line are shown.)", error.error.line)
        return error

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
        for record, qualifier in zip(records, names):
            bundle.progress(f"writing stages of {qualifier}")
            source = (record.source, record.def_line) if record.source_file == path else None
            write_kernel_stages(bundle, record, qualifier, workdir, path, python_source=source,
                                extra_meta={"virtual": target_info["virtual"],
                                            "executed": not target_info["virtual"]})
        launches = []
        for launch in recorder.launches:
            entry = launch.__dict__.copy()
            entry["stage_qualifier"] = by_hash.get(launch.compile_hash)
            launches.append(entry)
        bundle.add("triton.launches", "Launches", "Run", "json", json.dumps(launches, indent=2, default=str),
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


def describe_target(target: GpuTarget, executed: bool, real: str | None) -> dict[str, Any]:
    """What the result says about where it was compiled and whether anything ran."""
    info: dict[str, Any] = {"name": target.name, "backend": target.backend, "arch": target.arch,
                            "warp_size": target.warp_size, "virtual": not executed, "executed": executed,
                            "worker_device": real}
    if executed:
        import torch
        info["device"] = torch.cuda.get_device_name(0)
        info["note"] = "ran on the worker's GPU; launch times from triton.testing.do_bench"
    else:
        info["device"] = target.product
        info["note"] = "virtual target: compiled only, nothing ran, no timings exist"
    return info
