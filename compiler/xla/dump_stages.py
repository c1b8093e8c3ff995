"""The stages of an XLA dump directory (`--xla_dump_to`): the pass snapshots, buffer assignment and
memory over program order, and the kernels' LLVM IR and assembly. Written by the XLA pipelines
after a compile and by the `import` pipeline for a dump made elsewhere, so both show the same."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any, Callable

from compiler.model import Stage
from compiler.pipeline import Bundle
from compiler.xla import dump_index, hlo_text, memory, traces

MAX_PASS_SNAPSHOTS = 400
MAX_KERNEL_STAGES = 64
MAX_ASM_BYTES = 2_000_000


@dataclass(frozen=True)
class ModuleStages:
    """Where the stages of one compiled module go. A job of one module (an HLO, StableHLO or `fn`
    job, an imported dump) keeps the plain keys: `xla.optimized`, `xla.pass:<seq>...`. Each module
    of a JAX program is keyed like a kernel's stages (`triton.ptx:<kernel>`): `xla.optimized:jit_f`,
    `xla.pass:jit_f/<seq>...`, titled `[jit_f]` as PyTorch titles a compile's `[0/0]`, all in one
    group named after the function, the line that defines it and the line that called it."""

    bundle: Bundle
    module: str = ""  # "" for the job's only module
    group: str = ""   # every stage's group ("" keeps each stage's own)

    def key(self, key: str) -> str:
        """The key a stage of this module has: `key`, or `key` qualified by the module."""
        if not self.module:
            return key
        base, sep, tail = key.partition(":")
        return f"{base}:{self.module}/{tail}" if sep else f"{base}:{self.module}"

    def add(self, key: str, title: str, group: str, fmt: str, value: Any,
            source_map: list[list[int]] | None = None, meta: dict[str, Any] | None = None) -> Stage:
        return self.bundle.add(self.key(key), f"{title} [{self.module}]" if self.module else title,
                               self.group or group, fmt, value, source_map=source_map, meta=meta)

    def progress(self, text: str) -> None:
        self.bundle.progress(text + (f" ({self.module})" if self.module else ""))


def read_text(path: str, limit: int | None = None) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read(limit) if limit else f.read()


def snapshot_key(snap: dump_index.SnapshotName) -> str:
    return f"xla.pass:{snap.seq:04d}.{snap.pipeline}.{snap.after}"


def pass_stages(bundle: ModuleStages, index: dump_index.DumpIndex, dump_dir: str, before_text: str,
                hlo_map: Callable[[str], list[list[int]]], runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`xla.passes` (the index of pass snapshots, with XLA's own pass times when `runs` has them)
    and one `xla.pass:<seq>...` stage per snapshot; returns the per-pass timing records."""
    snapshots = index.snapshots[:MAX_PASS_SNAPSHOTS]
    matched = traces.match_runs_to_snapshots(runs, snapshots)
    run_of_seq = {seq: runs[j] for j, seq in matched.items()}
    # First read: the index (written before the snapshots so the page lists it first).
    records = []
    prev_text = before_text
    prev_time = (os.stat(os.path.join(dump_dir, index.before_optimizations)).st_mtime_ns
                 if index.before_optimizations else None)
    for snap in snapshots:
        path = os.path.join(dump_dir, snap.file)
        text = read_text(path)
        mtime = os.stat(path).st_mtime_ns
        records.append({"seq": snap.seq, "pipeline": snap.pipeline, "pass": snap.after, "next": snap.before,
                        "changed": text != prev_text, "instructions": hlo_text.instruction_count(text),
                        "key": bundle.key(snapshot_key(snap)), "file": snap.file,
                        "ms_since_previous": None if prev_time is None else round((mtime - prev_time) / 1e6, 3),
                        "pass_ms": round(run_of_seq[snap.seq]["ms"], 3) if snap.seq in run_of_seq else None})
        prev_text, prev_time = text, mtime
    header = f"{'#':>4}  {'pipeline':<40} {'pass':<44} {'changed':<8} {'instrs':>6} {'ms':>8}"
    rows = [header, "-" * len(header)]
    for r in records:
        ms = "" if r["ms_since_previous"] is None else f"{r['ms_since_previous']:.1f}"
        rows.append(f"{r['seq']:>4}  {r['pipeline']:<40} {r['pass']:<44} {('yes' if r['changed'] else 'no'):<8} "
                    f"{r['instructions']:>6} {ms:>8}")
    if runs:
        keys = {j: bundle.key(f"xla.pass:{seq:04d}") for j, seq in matched.items()}
        rows += ["", f"Every pass XLA ran ({len(runs)}), from XLA's own trace events; 'snapshot' marks the "
                     f"passes that changed the module", "",
                 f"{'pipeline':<44} {'pass':<44} {'ms':>9}  snapshot", "-" * 112]
        for j, r in enumerate(runs):
            rows.append(f"{'  ' * (r['depth'] - 1) + r['pipeline']:<44} {r['pass']:<44} {r['ms']:>9.3f}  "
                        f"{keys.get(j, '')}")
    dropped = len(index.snapshots) - len(records)
    note = ("XLA dumps a module after each pass that changed it, and at the start of each pipeline "
            "(pass 'pipeline-start'); 'changed' compares a snapshot with the one before it; 'ms' is the time "
            "between consecutive snapshot files.")
    if dropped > 0:
        note += f" {dropped} later snapshots were not kept (limit {MAX_PASS_SNAPSHOTS})."
    bundle.add("xla.passes", "Pass snapshots", "Passes", "text", "\n".join(rows) + "\n",
               meta={"passes": records, "note": note, "count": len(index.snapshots),
                     "runs": [dict(r, snapshot=matched.get(j)) for j, r in enumerate(runs)]})
    # Second read: one stage per snapshot, each naming the previous one for the diff view.
    prev_key = None
    if index.before_optimizations:
        bundle.add("xla.pass:before_optimizations", "Before optimizations", "Passes", "hlo", before_text,
                   source_map=hlo_map(before_text))
        prev_key = bundle.key("xla.pass:before_optimizations")
    for snap, r in zip(snapshots, records):
        text = read_text(os.path.join(dump_dir, r["file"]))
        bundle.add(snapshot_key(snap), f"{r['seq']:04d} {r['pipeline']} / {r['pass']}", "Passes", "hlo", text,
                   source_map=hlo_map(text),
                   meta={"diff_with": prev_key, "pipeline": r["pipeline"], "pass": r["pass"],
                         "changed": r["changed"], "instructions": r["instructions"]})
        prev_key = r["key"]
    if runs:
        return [{"pipeline": r["pipeline"], "pass": r["pass"], "ms": round(r["ms"], 3), "changed": j in matched}
                for j, r in enumerate(runs) if r["depth"] >= 1]
    return [{"seq": r["seq"], "pipeline": r["pipeline"], "pass": r["pass"], "ms": r["ms_since_previous"]}
            for r in records]



def memory_stages(bundle: ModuleStages, index: dump_index.DumpIndex, dump_dir: str, stats: dict[str, Any]) -> None:
    """`xla.buffer_assignment` and `xla.memory` (compiler/xla/memory.py), with XLA's memory stats
    when the compile reported them (`stats`: {} for a dump read on its own)."""
    if not index.buffer_assignment:
        return
    ba_text = read_text(os.path.join(dump_dir, index.buffer_assignment))
    bundle.add("xla.buffer_assignment", "Buffer assignment", "Memory", "text", ba_text,
               meta={"xla_memory_stats": stats})
    if index.live_range:
        live_text = read_text(os.path.join(dump_dir, index.live_range))
    else:
        live_text = memory.live_range_in_buffer_assignment(ba_text)
        if live_text is None:
            return
    timeline = memory.memory_timeline(memory.parse_buffer_assignment(ba_text), memory.parse_live_range(live_text))
    timeline["xla_memory_stats"] = stats
    bundle.add("xla.memory", "Memory over program order", "Memory", "memory", timeline,
               meta={"peak_bytes": timeline["peak_bytes"], "temp_size_in_bytes": stats.get("temp_size_in_bytes")})



def code_stages(bundle: ModuleStages, index: dump_index.DumpIndex, dump_dir: str) -> None:
    """One `xla.llvm_ir:<kernel>` stage per dumped LLVM module, and `xla.asm` from the dumped objects."""
    def kernel_name(module: str) -> str:
        name = re.sub(r"^__compute_module_", "", module)
        return re.sub(r"_kernel_module$", "", name)

    for module, file in sorted(index.llvm_ir.items())[:MAX_KERNEL_STAGES]:
        bundle.add(f"xla.llvm_ir:{kernel_name(module)}", f"LLVM IR {kernel_name(module)}", "Code", "llvm",
                   read_text(os.path.join(dump_dir, file)), meta={"file": file, "note": "after LLVM optimization"})
    objdump = shutil.which("objdump") or shutil.which("llvm-objdump")
    if not index.object_files:
        return
    if objdump is None:
        bundle.add("xla.asm", "Assembly", "Code", "text", "no objdump on this machine: object files were "
                   "dumped but cannot be disassembled\n")
        return
    parts = []
    for module, file in sorted(index.object_files.items()):
        proc = subprocess.run([objdump, "-d", "--no-show-raw-insn", "-C", os.path.join(dump_dir, file)],
                              capture_output=True, text=True, timeout=120)
        parts.append(f"# {kernel_name(module)}  ({file})\n" + (proc.stdout or proc.stderr))
    text = "\n".join(parts)
    if len(text) > MAX_ASM_BYTES:
        text = text[:MAX_ASM_BYTES] + "\n[irscope: disassembly cut]\n"
    bundle.add("xla.asm", "Assembly", "Code", "asm", text,
               meta={"note": f"{os.path.basename(objdump)} -d of the object files XLA dumped", "objects": len(parts)})




def write_dump_stages(bundle: Bundle, index: dump_index.DumpIndex, dump_dir: str) -> int:
    """Every stage a dump directory read on its own gives (an imported dump: no compile result, so
    no cost analysis, run time or XLA memory stats): the snapshots, the optimized module, the
    partitioned module, memory, kernels. Source maps point at no user line. Returns the count."""
    before = len(bundle.manifest.stages)
    before_text = read_text(os.path.join(dump_dir, index.before_optimizations)) if index.before_optimizations else ""
    pass_stages(ModuleStages(bundle), index, dump_dir, before_text, lambda text: [], [])
    partitioned = [s for s in index.snapshots if s.after == "spmd-partitioning"]
    if partitioned:
        text = read_text(os.path.join(dump_dir, partitioned[-1].file))
        bundle.add("xla.spmd", "Partitioned HLO", "SPMD", "hlo", text, meta={"snapshot": partitioned[-1].file})
    if index.after_optimizations:
        optimized = read_text(os.path.join(dump_dir, index.after_optimizations))
        bundle.add("xla.optimized", "Optimized HLO", "XLA", "hlo", optimized,
                   meta={"scheduled": hlo_text.parse_hlo_text(optimized).is_scheduled})
    memory_stages(ModuleStages(bundle), index, dump_dir, {})
    code_stages(ModuleStages(bundle), index, dump_dir)
    return len(bundle.manifest.stages) - before
