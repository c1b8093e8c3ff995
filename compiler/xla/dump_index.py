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


def index_dump(files: Iterable[str]) -> DumpIndex | None:
    """Sort the names in a dump directory into one DumpIndex for the compiled module.

    A dump may hold several modules (JAX compiles helpers too); the one that reached the end of
    compilation (it has `*.cpu_after_optimizations.txt`) last is the one the user asked for."""
    files = sorted(files)
    finals = [f for f in files if f.endswith(".cpu_after_optimizations.txt") or
              re.search(r"\.[a-z]+_after_optimizations\.txt$", f)]
    if finals:
        prefix = finals[-1][: finals[-1].rindex("_after_optimizations.txt")]
        prefix = prefix[: prefix.rindex(".")]  # drop the backend tag ("cpu")
    else:
        befores = [f for f in files if f.endswith(".before_optimizations.txt")]
        if not befores:
            return None
        prefix = befores[-1][: -len(".before_optimizations.txt")]
    index = DumpIndex(prefix=prefix)
    for f in files:
        if not f.startswith(prefix + "."):
            continue
        rest = f[len(prefix) + 1:]
        snap = parse_snapshot_name(f)
        if snap is not None:
            index.snapshots.append(snap)
        elif rest == "before_optimizations.txt":
            index.before_optimizations = f
        elif re.fullmatch(r"[a-z]+_after_optimizations\.txt", rest):
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
