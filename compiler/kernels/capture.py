"""Capture of every Triton compilation in a process, through two public hooks in `triton.knobs`:
`runtime.add_stages_inspection_hook` wraps each lowering stage (to note which bytes of the
`MLIR_ENABLE_DUMP=1` per-pass dump file each stage wrote, to keep the module after the stage's last
pass, and to keep ptxas's `-v` log), and `compilation.listener` hands over the files Triton wrote to
its cache and the per-stage compile times. A library: the triton pipeline and the PyTorch GPU path
(compiler/pytorch/gpu_codegen.py) both use it.
"""
from __future__ import annotations

import contextlib
import io
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from compiler.kernels import dump_stream
from compiler.kernels.jit_location import jit_def_line, jit_file

# Triton's stages that run MLIR pass managers, in order; their per-pass dumps make `triton.passes`.
MLIR_STAGES = ("ttir", "ttgir", "llir")


@dataclass
class CompiledRecord:
    """One Triton compilation, as Triton itself reported it."""

    hash: str
    name: str = ""
    dump_paths: dict[str, str] = field(default_factory=dict)  # stage -> its MLIR per-pass dumps
    dumps_skipped: int = 0  # > 0: its stages ran undumped, this many bytes of dumps being kept already
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
    ptx_given_to_ptxas: str = ""  # the PTX the cubin stage assembles (kept for ptxas's errors)

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

    def __init__(self, dump_dir: str, dump_budget_bytes: int,
                 on_compiled: Callable[[CompiledRecord], None] | None = None):
        self.dump_dir = dump_dir
        self.records: dict[str, CompiledRecord] = {}
        self.on_compiled = on_compiled  # called with each record as its compilation ends
        # The per-pass dumps kept so far, and how many bytes may be (the job's pass_dump_mb): a job's
        # directories hold job_disk_mb and a program of many kernels and autotune configs dumps more
        # (Triton's fused-attention tutorial: 2.7 GB). Past it a stage runs undumped and its
        # record says so (compiler/kernels/stages.py).
        self.dumped_bytes, self.dump_budget_bytes = 0, dump_budget_bytes
        os.makedirs(dump_dir, exist_ok=True)
        # Triton prints the dumps through its buffered MLIR_DUMP_PATH stream, split by stage
        # (compiler/kernels/dump_stream.py), or to stderr where a Triton has none.
        os.environ["MLIR_ENABLE_DUMP"] = "1"

    def adopt(self, record: CompiledRecord) -> None:
        """A compilation captured in a helper process of this one (compiler/kernels/parallel.py)."""
        self.records[record.hash] = record
        if self.on_compiled is not None:
            self.on_compiled(record)

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
            if ext in MLIR_STAGES and self.dumped_bytes >= self.dump_budget_bytes:
                # Triton still prints the passes (MLIR_ENABLE_DUMP is read once per process): to
                # nowhere, the stream being aside between stages (or stderr pointed at /dev/null)
                record.dumps_skipped = self.dumped_bytes
                if dump_stream.available(self.dump_dir):
                    result = stage_fn(src, metadata)
                else:
                    with _stderr_to(os.devnull):
                        result = stage_fn(src, metadata)
                record.final_ir[ext] = str(src if ext == "llir" else result)
                return result
            if ext in MLIR_STAGES:
                path = os.path.join(self.dump_dir, f"{record.hash[:16]}.{ext}.passes.mlir")
                record.dump_paths[ext] = path
                if dump_stream.available(self.dump_dir):
                    dump_stream.begin(path)
                    try:
                        result = stage_fn(src, metadata)
                    finally:
                        dump_stream.end(path)
                else:
                    with _stderr_to(path) as failed:
                        try:
                            result = stage_fn(src, metadata)
                        except BaseException:
                            failed.append(True)
                            raise
                if os.path.exists(path):
                    self.dumped_bytes += os.path.getsize(path)
                # ttir/ttgir return the module they ran on; llir translates `src` to LLVM after its
                # pass manager ran on it in place, so `src` now holds the last MLIR of the stage.
                final = src if ext == "llir" else result
                record.final_ir[ext] = str(final)
                return result
            if ext == "cubin":
                from triton import knobs
                record.ptx_given_to_ptxas = src if isinstance(src, str) else ""
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
            record.source_file = jit_file(fn)
            record.def_line = jit_def_line(fn)
        record.signature = {str(k): str(v) for k, v in (getattr(src, "signature", None) or {}).items()}
        names = list(record.signature)
        # constexpr keys are index paths into the argument list: (4,) is the fifth parameter
        record.constants = {_path_name(k, names): _plain(v) for k, v in (getattr(src, "constants", None) or {}).items()}
        record.complete = True
        if self.on_compiled is not None:
            self.on_compiled(record)

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


@contextlib.contextmanager
def diagnostics_kept(path: str) -> Iterator[None]:
    """Keep what is printed on file descriptor 2 meanwhile in `path` (MLIR prints its verifier's
    diagnostics there, not into the Python exception: "...: error: ... has an invalid layout"), and
    copy it back to stderr afterwards, so the worker's log still has it."""
    sys.stderr.flush()
    saved_fd = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved_fd, 2)
        os.close(saved_fd)
        with open(path, encoding="utf-8", errors="replace") as f:
            sys.stderr.write(f.read()[-(1 << 20):])
        sys.stderr.flush()


def first_mlir_error(path: str, max_lines: int = 6) -> str:
    """The first MLIR diagnostic of severity error in the file `diagnostics_kept` wrote (its line
    and the notes after it), or ""."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read(1 << 20).splitlines()
    except OSError:
        return ""
    for i, line in enumerate(lines):
        if ": error: " in line:
            return "\n".join(lines[i:i + max_lines]).strip()
    return ""


def _path_name(path: Any, names: list[str]) -> str:
    if isinstance(path, tuple) and path and isinstance(path[0], int) and path[0] < len(names):
        return ".".join([names[path[0]], *map(str, path[1:])])
    return ".".join(map(str, path)) if isinstance(path, tuple) else str(path)


def _plain(value: Any) -> Any:
    """A JSON-friendly spelling of a constexpr value."""
    value = getattr(value, "value", value)
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return str(value)


def qualifiers(records: list[CompiledRecord], always_number: bool = False) -> list[str]:
    """Stage qualifiers: the kernel name, with `.<n>` when the kernel was compiled more than once
    (or always, for autotune configs); formats.kernel_of reads the name back."""
    from compiler.formats import kernel_key_name
    totals: dict[str, int] = {}
    for r in records:
        totals[r.name] = totals.get(r.name, 0) + 1
    seen: dict[str, int] = {}
    out = []
    for r in records:
        n = seen.get(r.name, 0)
        seen[r.name] = n + 1
        name = kernel_key_name(r.name)
        out.append(f"{name}.{n}" if always_number or totals[r.name] > 1 else name)
    return out
