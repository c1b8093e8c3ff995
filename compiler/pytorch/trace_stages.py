"""PyTorch's structured trace (TORCH_TRACE entries) -> the stages irscope shows, and the compile
timings in it.

`trace_stages(entries, user_paths)` is a pure function: it returns stage specs and writes nothing,
so the live `pytorch` pipeline (after a compile, or as entries arrive) and the `import` pipeline
(a TORCH_TRACE made elsewhere) show the same stages for the same trace; `write` puts specs into a
result bundle. `user_paths` are the paths the user's file may have in the trace; a trace made on
another machine names that machine's paths.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from compiler import graph_drawing
from compiler.pipeline import Bundle
from compiler.pytorch import fx_graph_dot, guards as dynamo_guards
from compiler.pytorch import source_map as torch_source_map
from compiler.pytorch import trace as torch_trace

# Trace entry kind (or artifact name) -> (stage key prefix, title, group). Order is page order.
_GRAPH_STAGES = (
    ("dynamo_output_graph", "dynamo.fx_graph", "Dynamo FX graph", "Dynamo"),
    ("aot_joint_graph", "aot.joint_graph", "Joint graph", "AOTAutograd"),
    ("aot_forward_graph", "aot.forward_graph", "Forward graph", "AOTAutograd"),
    ("aot_inference_graph", "aot.forward_graph", "Inference graph", "AOTAutograd"),
    ("aot_backward_graph", "aot.backward_graph", "Backward graph", "AOTAutograd"),
    ("after_pre_grad_graph", "inductor.pre_grad_graph", "Pre-grad graph", "Inductor"),
    ("inductor_post_grad_graph", "inductor.post_grad_graph", "Post-grad graph", "Inductor"),
)

# Compile phases: PyTorch's own dynamo_timed event names, summed per phase.
_PHASES = (
    ("dynamo_tracing", ("bytecode_tracing",)),
    ("aot_autograd", ("aot_collect_metadata", "aot_trace_joint_graph", "aot_trace_inference_graph",
                      "min_cut_rematerialization_partition")),
    ("inductor_lowering", ("GraphLowering.run",)),
    ("scheduling_codegen", ("GraphLowering.codegen",)),
    ("kernel_compile", ("PyCodeCache.load_by_key_path", "async_compile.wait")),
    ("total", ("entire_frame_compile",)),
)

# Trace entries outside any Dynamo frame (AOTInductor on the export path) are grouped under this.
UNFRAMED = "export"


@dataclass(frozen=True)
class StageSpec:
    """One stage to write: `Bundle.add`'s arguments; `drawing` marks a DOT graph that `write`
    lays out with Graphviz (compiler/graph_drawing.py) into an `svg` stage."""

    key: str
    title: str
    group: str
    format: str
    value: Any
    source_map: list[list[int]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    drawing: bool = False


def _cid(entry: torch_trace.TraceEntry) -> str:
    return entry.compile_id or UNFRAMED


def is_user_path(path: str, user_paths: tuple[str, ...]) -> bool:
    """Whether a path as the trace prints it is the user's file. Dynamo's guard comments cut a
    path's head ("mp/job/model.py"), so a path that ends one of `user_paths` counts too."""
    return torch_source_map._is_user_path(path, user_paths) or any(
        not path.startswith("/") and p.endswith(path) for p in user_paths if "/" in path)


def trace_stages(entries: list[torch_trace.TraceEntry], user_paths: tuple[str, ...],
                 output_code_note: str = "") -> list[StageSpec]:
    """The graph, code, guard, recompile and graph-break stages of a trace, in compile order, with
    source maps to the file `user_paths` names. A key met twice (Dynamo's ids start again after
    torch._dynamo.reset()) gets `.2`, `.3`, ... appended."""
    specs: list[StageSpec] = []
    keys: set[str] = set()

    def add(spec: StageSpec) -> None:
        key, n = spec.key, 1
        while key in keys:
            n += 1
            key = f"{spec.key}.{n}"
        keys.add(key)
        specs.append(spec if key == spec.key else StageSpec(key, spec.title, spec.group, spec.format, spec.value,
                                                            spec.source_map, spec.meta, spec.drawing))

    node_lines: dict[str, dict[str, set[int]]] = {}
    for cid in dict.fromkeys(_cid(e) for e in entries):
        for_cid = [e for e in entries if _cid(e) == cid]
        for kind, key, title, group in _GRAPH_STAGES:
            for i, entry in enumerate(torch_trace.of_kind(for_cid, kind)):
                pairs, nodes = torch_source_map.fx_code_map(entry.payload, user_paths)
                node_lines.setdefault(cid, {})
                node_lines[cid] = torch_source_map.merge_node_lines(node_lines[cid], nodes)
                stage_key = f"{key}:{cid}" + (f".{i}" if i else "")
                if stage_key in keys:  # an inference graph after a forward graph of the same compile
                    continue
                meta: dict[str, Any] = {}
                if kind == "aot_backward_graph":
                    saved = torch_source_map.saved_for_backward(entry.payload)
                    meta = {"saved_for_backward": [n for n, _ in saved],
                            "note": f"Saved for backward ({len(saved)}): " + ", ".join(f"{n}: {t}" for n, t in saved)}
                add(StageSpec(stage_key, f"{title} [{cid}]", group, "python", entry.payload, pairs, meta))
                if kind == "dynamo_output_graph":
                    add(StageSpec(f"dynamo.fx_graph_drawing:{cid}" + (f".{i}" if i else ""), f"FX graph drawing [{cid}]",
                                  group, "dot", fx_graph_dot.to_dot(entry.payload), drawing=True))
        kernels: dict[str, set[int]] = {}
        for entry in torch_trace.of_kind(for_cid, "inductor_provenance_tracking_kernel_stack_traces"):
            try:
                traces = json.loads(entry.payload)
            except json.JSONDecodeError:
                continue
            for name, lines in torch_source_map.kernel_lines_from_provenance(traces, user_paths).items():
                kernels.setdefault(name, set()).update(lines)
        for entry in torch_trace.of_kind(for_cid, "inductor_provenance_tracking_node_mappings"):
            try:
                mappings = json.loads(entry.payload)
            except json.JSONDecodeError:
                continue
            found = torch_source_map.kernel_lines_from_node_mappings(mappings, node_lines.get(cid, {}))
            for name, lines in found.items():
                kernels.setdefault(name, set()).update(lines)
        for i, entry in enumerate(torch_trace.of_kind(for_cid, "inductor_output_code")):
            first = entry.payload.split("\n", 1)[0]
            suffix = ".backward" if "backward" in first else ("" if i == 0 else f".{i}")
            pairs = torch_source_map.output_code_map(entry.payload, node_lines.get(cid, {}), kernels)
            meta = {"file": (entry.data or {}).get("filename", "")}
            if output_code_note:
                meta["note"] = output_code_note
            add(StageSpec(f"inductor.output_code:{cid}{suffix}", f"Output code [{cid}]{suffix}", "Inductor", "python",
                          entry.payload, pairs, meta))
            for spec in kernel_stages(entry.payload, pairs, ""):
                if spec.key not in keys:
                    add(spec)
        for entry in torch_trace.of_kind(for_cid, "dynamo_cpp_guards_str"):
            add(StageSpec(f"dynamo.guards:{cid}", f"Guards [{cid}]", "Dynamo", "text", entry.payload,
                          torch_source_map.trailing_location_map(entry.payload, user_paths)))
        explained = guards_explained(entries, cid, user_paths)
        if explained is not None:
            recompile = " (recompile)" if explained["recompile"] else ""
            add(StageSpec(f"dynamo.guards_explained:{cid}", f"Guards explained [{cid}]{recompile}", "Dynamo", "guards",
                          explained, [], {"recompile": bool(explained["recompile"]),
                                          "guards": len(explained["guards"])}))
    recompiles = torch_trace.of_kind(entries, "recompile_reasons")
    if recompiles:
        text = "\n\n".join(f"## recompile {n} (compile {e.compile_id})\n{e.payload.strip()}"
                            for n, e in enumerate(recompiles, start=1))
        add(StageSpec("dynamo.recompiles", f"Recompiles ({len(recompiles)})", "Dynamo", "text", text,
                      torch_source_map.mention_map(text, user_paths)))
    breaks = torch_trace.of_kind(entries, "dynamo_graph_break_reason")
    if breaks:
        parts, pairs, offset = [], [], 0
        for n, entry in enumerate(breaks, start=1):
            block = f"## graph break {n} (compile {entry.compile_id})\n{entry.payload.rstrip()}\n"
            line = torch_source_map.graph_break_line(entry.payload, user_paths)
            if line:
                pairs += [[offset + i, line] for i in range(1, 3)]
            parts.append(block)
            offset += block.count("\n") + 1
        add(StageSpec("dynamo.graph_breaks", f"Graph breaks ({len(breaks)})", "Dynamo", "text", "\n".join(parts),
                      pairs, {"count": len(breaks)}))
    return specs


def kernel_stages(code: str, pairs: list[list[int]], suffix: str) -> list[StageSpec]:
    """One `kernel:<name>` stage per kernel defined in an output code, its lines' sources kept."""
    specs = []
    for name, (first, last) in torch_source_map.kernel_blocks(code).items():
        lines = code.split("\n")[first:last - 1]  # the kernel's own source, without the Python around it
        header = code.split("\n")[first - 1]
        fmt = "cpp" if "cpp_pybinding" in header or "cpp(" in header else "python"
        kernel_pairs = [[a - first, b] for a, b in pairs if first < a < last]
        specs.append(StageSpec(f"kernel:{name}{suffix}", name, "Kernels", fmt, "\n".join(lines), kernel_pairs))
    return specs


def guards_explained(entries: list[torch_trace.TraceEntry], cid: str,
                     user_paths: tuple[str, ...]) -> dict[str, Any] | None:
    """The `guards` stage of one compile id (compiler/formats.py GuardsExplained): its guards by
    kind from `dynamo_cpp_guards_str`, and, for a recompile, the guard of each earlier compile that
    failed (`recompile_reasons`) with the input change that failed it. None without guards."""
    def user(path: str) -> bool:
        return is_user_path(path, user_paths)

    printed = [e for e in entries if _cid(e) == cid and e.kind == "dynamo_cpp_guards_str"]
    if not printed:
        return None
    guards = dynamo_guards.parse_guards(printed[-1].payload, user)
    by_cid: dict[str, list[dynamo_guards.Guard]] = {}
    for e in torch_trace.of_kind(entries, "dynamo_cpp_guards_str"):
        if e.compile_id:
            by_cid[e.compile_id] = dynamo_guards.parse_guards(e.payload, user)
    failures = []
    for e in torch_trace.of_kind(entries, "recompile_reasons"):
        if _cid(e) != cid:
            continue
        for earlier, reason in dynamo_guards.parse_recompile_reasons(e.payload):
            failures.append(dynamo_guards.explain_failure(earlier, reason, by_cid.get(earlier, []), guards).to_json())
    frame = ""
    for e in entries:
        if _cid(e) == cid and e.kind == "dynamo_start" and isinstance(e.data, dict) and e.data.get("stack"):
            strings = torch_trace.string_table(entries)
            top = e.data["stack"][-1]
            filename = strings.get(top.get("filename"), str(top.get("filename", "")))
            frame = f"{top.get('name', '?')} at {filename.rsplit('/', 1)[-1]}:{top.get('line', '?')}"
            break
    order = ["tensor", "type", "constant", "global", "shape", "other"]
    present = [g for g in order if any(x.group == g for x in guards)]
    return {"compile_id": cid, "frame": frame,
            "groups": {g: dynamo_guards.GROUPS[g] for g in present},
            "guards": [{k: v for k, v in g.to_json().items() if v not in (None, "", {})} for g in guards],
            "recompile": [{k: v for k, v in f.items() if v not in (None, "")} for f in failures],
            "latency_us": dynamo_guards.guard_latency_us(printed[-1].payload),
            "source": "TORCH_TRACE: dynamo_cpp_guards_str (the guard tree Dynamo built) and recompile_reasons "
                      "(the guards that failed)"}


def write(bundle: Bundle, specs: list[StageSpec]) -> None:
    """Add each spec to the bundle, skipping keys it has already (stages written as they came)."""
    for spec in specs:
        if bundle.has(spec.key):
            continue
        if spec.drawing:
            graph_drawing.add_graph(bundle, spec.key, spec.title, spec.group, spec.value, meta=spec.meta or None)
        else:
            bundle.add(spec.key, spec.title, spec.group, spec.format, spec.value, source_map=spec.source_map,
                       meta=spec.meta)


def compile_timings(entries: list[torch_trace.TraceEntry]) -> dict[str, Any]:
    """Seconds per compile phase, summed over compile ids, from the trace's chromium events."""
    begins: dict[tuple[str, str | None], list[float]] = {}
    durations: dict[str, float] = {}
    for entry in torch_trace.of_kind(entries, "chromium_event"):
        try:
            event = json.loads(entry.payload)
        except json.JSONDecodeError:
            continue
        name, phase, ts = event.get("name"), event.get("ph"), event.get("ts")
        key = (name, (event.get("args") or {}).get("compile_id"))
        if phase == "B":
            begins.setdefault(key, []).append(ts)
        elif phase == "E" and begins.get(key):
            durations[name] = durations.get(name, 0.0) + (ts - begins[key].pop()) / 1e6
    out: dict[str, Any] = {}
    for phase, names in _PHASES:
        if any(n in durations for n in names):
            out[f"{phase}_s"] = round(sum(durations.get(n, 0.0) for n in names), 4)
    out["events"] = {name: round(seconds, 4) for name, seconds in sorted(durations.items(), key=lambda kv: -kv[1])[:40]}
    out["source"] = "PyTorch's dynamo_timed events in TORCH_TRACE"
    return out
