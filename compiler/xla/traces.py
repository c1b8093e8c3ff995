"""XLA's own TraceMe events of a compile (recorded by the profiler around it): every pass each
HloPassPipeline ran with its duration, matched to the dump's snapshots, and the backend phases."""
from __future__ import annotations

from typing import Any

from compiler.xla.dump_index import SnapshotName


def pass_runs(events: list[list[Any]], module: str) -> list[dict[str, Any]]:
    """Every pass XLA ran on `module`, in order, from profiler events [name, start_ns,
    duration_ns]: a pipeline is an event named `<pipeline> (<module>)`; its passes are the
    events directly inside it (a nested pipeline shows as a pass holding its own pipeline
    event). Invariant checkers are left out."""
    suffix = f" ({module})"
    evs = sorted(((n, int(s), int(d)) for n, s, d in events), key=lambda e: (e[1], -e[2]))
    pipelines = [e for e in evs if e[0].endswith(suffix)]
    runs = []
    for name, start, duration in evs:
        if name.endswith(suffix) or name == "RunInvariantCheckers":
            continue
        end = start + duration
        # The innermost pipeline event containing this one is its pipeline.
        parent = None
        for p in pipelines:
            if p[1] <= start and end <= p[1] + p[2] and (parent is None or p[2] <= parent[2]):
                parent = p
        if parent is None:
            continue
        depth = sum(1 for p in pipelines if p[1] <= start and end <= p[1] + p[2])
        runs.append({"pipeline": parent[0][: -len(suffix)], "pass": name, "start_ns": start,
                     "ms": duration / 1e6, "depth": depth})
    return runs


def match_runs_to_snapshots(runs: list[dict[str, Any]], snapshots: list[SnapshotName]) -> dict[int, int]:
    """Run index -> snapshot seq, for the passes that changed the module (XLA dumps a snapshot
    after each of those). Pipeline names in file names have '_' for ' '."""
    # A snapshot is written when its pass ends, and a pass may hold a whole nested pipeline, so
    # runs are walked in the order they ended.
    order = sorted(range(len(runs)), key=lambda j: (runs[j]["start_ns"] + runs[j]["ms"] * 1e6, -runs[j]["depth"]))
    out: dict[int, int] = {}
    i = 0
    for snap in snapshots:
        if snap.after == "pipeline-start":
            continue
        for k in range(i, len(order)):
            r = runs[order[k]]
            if r["pass"].replace(" ", "_") == snap.after and r["pipeline"].replace(" ", "_") == snap.pipeline:
                out[order[k]] = snap.seq
                i = k + 1
                break
    return out


# XLA CPU's trace names for the compile phases after the HLO passes (cpu_compiler.cc,
# thunk_emitter.cc, fusion_compiler.cc, jit_compiler.cc), summed per name.
CPU_PHASES = ("PjRtCpuClient::Compile", "CpuCompiler::RunBackend", "ThunkEmitter::EmitEntryComputation",
              "FusionCompiler::Compile", "Codegen", "JitCompiler::Compile")


def trace_phases(events: list[list[Any]], module: str) -> dict[str, float]:
    """Milliseconds per compile phase: the outermost HLO pass pipelines together, then the
    backend phases XLA traces."""
    suffix = f" ({module})"
    pipelines = sorted(((int(s), int(s) + int(d)) for n, s, d in events if n.endswith(suffix)))
    outer, reach = 0, -1
    for start, end in pipelines:
        if start >= reach:
            outer += end - start
            reach = end
    out = {"hlo_pass_pipelines": outer / 1e6} if pipelines else {}
    for name in CPU_PHASES:
        total = sum(int(d) for n, _, d in events if n == name)
        if total:
            out[name] = total / 1e6
    return out
