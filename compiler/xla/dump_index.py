"""The files XLA writes to its dump directory (`--xla_dump_to`), sorted by role: pass snapshots,
the module before and after optimization, buffer assignment, live ranges, LLVM IR, object files.
Pure functions over file names."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Iterable

# module_0003.jit_fn.0012.simplification.after_algsimp.before_simplify-sorts.txt
# module_0003.jit_fn.0023.copy-insertion.after_adding_copies_to_resolve_interference.txt
_SNAPSHOT_RE = re.compile(
    r"^module_(?P<module_id>\d+)\.(?P<module>.+)\.(?P<seq>\d{4})\.(?P<pipeline>[^.]+)"
    r"\.after_(?P<after>.+?)(?:\.before_(?P<before>.+))?\.txt$")


@dataclass(frozen=True)
class SnapshotName:
    """One `--xla_dump_hlo_pass_re` file: the module after pass `after` of `pipeline`."""

    module_id: str
    module: str
    seq: int
    pipeline: str
    after: str
    before: str | None
    file: str


def parse_snapshot_name(file: str) -> SnapshotName | None:
    """The parts of a pass-snapshot file name, or None for any other dump file."""
    m = _SNAPSHOT_RE.match(file)
    if not m:
        return None
    return SnapshotName(m["module_id"], m["module"], int(m["seq"]), m["pipeline"], m["after"], m["before"], file)


# module_0001.jit_fn.cpu_after_optimizations.txt, module_0001.jit_fn.sm_9.0a_gpu_after_optimizations.txt
_FINAL_RE = re.compile(r"^(?P<prefix>module_\d+\.[^.]+)\.(?P<tag>cpu|sm_\d+\.\d+[a-z]?_gpu|[a-z0-9]+_gpu|[a-z]+)"
                       r"_after_optimizations\.txt$")


@dataclass
class DumpIndex:
    """The files XLA dumped for one module, by role. Paths are relative to the dump directory."""

    prefix: str
    snapshots: list[SnapshotName] = field(default_factory=list)
    before_optimizations: str | None = None
    after_optimizations: str | None = None
    buffer_assignment: str | None = None
    live_range: str | None = None
    memory_report: str | None = None
    llvm_ir: dict[str, str] = field(default_factory=dict)        # kernel module -> optimised .ll
    llvm_ir_no_opt: dict[str, str] = field(default_factory=dict)
    object_files: dict[str, str] = field(default_factory=dict)   # kernel module -> .o
    # XLA:GPU
    ptx: dict[str, str] = field(default_factory=dict)            # LLVM module ("1") -> .ptx
    debug_options: str | None = None                             # the DebugOptions the compile ran with
    schedule: str | None = None                                  # the latency-hiding scheduler's ScheduleProto
    ttir: dict[str, str] = field(default_factory=dict)           # Triton fusion -> its TTIR
    triton_passes: dict[str, str] = field(default_factory=dict)  # Triton fusion -> its per-pass MLIR dump

    @property
    def module_name(self) -> str:
        """The module's name ("jit_fn"), which prefixes the dump files XLA writes without the module id."""
        return self.prefix.split(".", 1)[1]


def index_dump(files: Iterable[str]) -> DumpIndex | None:
    """Sort the names in a dump directory into one DumpIndex for the compiled module.

    A dump may hold several modules (JAX compiles helpers too); the one that reached the end of
    compilation (it has `*.cpu_after_optimizations.txt`) last is the one the user asked for."""
    files = sorted(files)
    finals = [m for m in map(_FINAL_RE.match, files) if m]
    if finals:
        prefix = finals[-1]["prefix"]
    else:
        befores = [f for f in files if f.endswith(".before_optimizations.txt")]
        if not befores:
            return None
        prefix = befores[-1][: -len(".before_optimizations.txt")]
    index = DumpIndex(prefix=prefix)
    bare = index.module_name + "."  # files XLA names after the module alone
    for f in files:
        if f.startswith(bare):
            rest = f[len(bare):]
            if rest == "schedule.txt":
                index.schedule = f
            elif rest.endswith(".triton-to-llvm.txt"):
                index.triton_passes[rest[: -len(".triton-to-llvm.txt")]] = f
            continue
        if not f.startswith(prefix + "."):
            continue
        rest = f[len(prefix) + 1:]
        snap = parse_snapshot_name(f)
        if snap is not None:
            index.snapshots.append(snap)
        elif rest == "before_optimizations.txt":
            index.before_optimizations = f
        elif rest == "debug_options":
            index.debug_options = f
        elif rest.endswith(".ptx"):
            index.ptx[rest[: -len(".ptx")]] = f
        elif rest.endswith(".ttir.txt") and not rest.endswith(".before_validation.ttir.txt"):
            index.ttir[rest[: -len(".ttir.txt")]] = f
        elif re.fullmatch(r"(?:[a-z0-9]+|sm_\d+\.\d+[a-z]?)_?[a-z]*_after_optimizations\.txt", rest):
            index.after_optimizations = f
        elif rest.endswith("_after_optimizations-buffer-assignment.txt"):
            index.buffer_assignment = f
        elif rest.endswith("_after_optimizations-live-range.txt"):
            index.live_range = f
        elif rest.endswith("_after_optimizations-memory-usage-report.txt"):
            index.memory_report = f
        elif rest.endswith(".ir-with-opt.ll"):
            index.llvm_ir[rest[: -len(".ir-with-opt.ll")]] = f
        elif rest.endswith(".ir-no-opt.ll"):
            index.llvm_ir_no_opt[rest[: -len(".ir-no-opt.ll")]] = f
        elif rest.startswith("obj-file.") and rest.endswith(".o"):
            index.object_files[rest[len("obj-file."): -2]] = f
    index.snapshots.sort(key=lambda s: s.seq)
    return index


def read_dump(directory: str) -> DumpIndex | None:
    """index_dump over the files of a directory."""
    if not os.path.isdir(directory):
        return None
    return index_dump(os.listdir(directory))
