"""Structured-trace entries -> stages, one entry at a time, as PyTorch writes them.

`TraceStages.add(entry)` writes every stage the entry completes, so Dynamo's graph is a stage
while AOTAutograd and Inductor still run; `finish` writes what only the whole compile can say
(graph breaks, recompiles, the artifact logs) and anything still held. Stage keys, titles and
texts are the same whether the entries arrive one by one or all at once.

Within a compile id a stage waits only where its text or source map needs a later entry:
- Inductor's pre-grad graph (written before AOTAutograd runs) waits for the compile id's first
  AOTAutograd stage, so the page's groups keep their order: Dynamo, AOTAutograd, Inductor;
- the output code (written before its kernels are compiled) waits for the provenance entries
  Inductor writes once they are, which tie its kernels to the user's lines.

The live `pytorch` pipeline feeds entries as they arrive; the `import` pipeline (a TORCH_TRACE
made elsewhere) feeds a whole trace through `write_trace`, so both show the same stages for the
same trace. `user_paths` are the paths the user's file may have in the trace.
"""
from __future__ import annotations

import json
import re
from typing import Any

from compiler import formats, graph_drawing
from compiler.kernels.resources import write_resource_table
from compiler.pipeline import Bundle
from compiler.pytorch import compile_index, fx_graph_dot
from compiler.pytorch import guards as dynamo_guards
from compiler.pytorch import source_map as torch_source_map
from compiler.pytorch import trace as torch_trace
from compiler.user_code import cut_irscope_frames

# Trace entry kind (or artifact name) -> (stage key prefix, title, group).
GRAPH_STAGES = (
    ("dynamo_output_graph", "dynamo.fx_graph", "Dynamo FX graph", "Dynamo"),
    ("aot_joint_graph", "aot.joint_graph", "Joint graph", "AOTAutograd"),
    ("aot_forward_graph", "aot.forward_graph", "Forward graph", "AOTAutograd"),
    ("aot_inference_graph", "aot.forward_graph", "Inference graph", "AOTAutograd"),
    ("aot_backward_graph", "aot.backward_graph", "Backward graph", "AOTAutograd"),
    ("after_pre_grad_graph", "inductor.pre_grad_graph", "Pre-grad graph", "Inductor"),
    ("inductor_post_grad_graph", "inductor.post_grad_graph", "Post-grad graph", "Inductor"),
)
_GRAPH_KINDS = {kind: (key, title, group) for kind, key, title, group in GRAPH_STAGES}
_PROVENANCE_STACKS = "inductor_provenance_tracking_kernel_stack_traces"
_PROVENANCE_NODES = "inductor_provenance_tracking_node_mappings"

# artifact log -> (stage key prefix, title)
LOG_STAGES = (
    ("bytecode", "dynamo.bytecode", "Bytecode, original and modified"),
    ("ir_pre_fusion", "inductor.ir_pre_fusion", "IR before fusion"),
    ("ir_post_fusion", "inductor.ir_post_fusion", "IR after fusion"),
    ("fusion", "inductor.fusion", "Fusion decisions"),
)

# what the user's file is, where a stage's text names it (stage meta `file_names`: `name`, `about`)
USERS_FILE_NAME = "your source, the model in the editor"
USERS_FILE_ABOUT = ("the job runs the editor's text as a file named {file}, so PyTorch's comments and "
                    "locations name that file; its lines are your lines")

PROVENANCE_NOTE = ("irscope compiles with torch._inductor.config.trace.provenance_tracking_level = 1 so that "
                   "kernels link to your lines; it adds only the '# [Provenance debug handles]' comments.")

# Trace entries outside any Dynamo frame (AOTInductor on the export path) are grouped under this.
UNFRAMED = "export"


def _cid(entry: torch_trace.TraceEntry) -> str:
    return entry.compile_id or UNFRAMED


def _base(cid: str) -> str:
    """A compile id without Dynamo's restart attempt ("0/1_1" -> "0/1")."""
    return cid.partition("_")[0]


class _CompileId:
    """What one compile id has produced so far."""

    def __init__(self) -> None:
        self.node_lines: dict[str, set[int]] = {}
        self.kernels: dict[str, set[int]] = {}
        self.kind_counts: dict[str, int] = {}
        self.output_codes = 0
        self.has_aot = False
        self.has_backward = False  # AOTAutograd wrote a backward graph: a training step
        self.held: list[torch_trace.TraceEntry] = []  # Inductor graphs waiting for AOTAutograd's
        self.pending_code: list[torch_trace.TraceEntry] = []  # output code waiting for provenance


class TraceStages:
    """Writes a job's stages from its structured trace, entry by entry (see the module doc)."""

    def __init__(self, bundle: Bundle, user_paths: tuple[str, ...], output_code_note: str = PROVENANCE_NOTE,
                 link_lines: bool = True):
        """`output_code_note`: the note on each output code stage; `link_lines`: False for a trace
        whose user file is not the one in the editor (an import), so no stage tints its lines."""
        self.bundle, self.user_paths = bundle, user_paths
        self.output_code_note, self.link_lines = output_code_note, link_lines
        self.entries: list[torch_trace.TraceEntry] = []
        self._ids: dict[str, _CompileId] = {}
        self._keys: set[str] = set()
        # each GPU kernel's user lines, by name and by the file Triton compiles it from, as the output
        # codes name them (source_map.kernel_user_lines): the kernels' rows of the resource table
        self.kernel_lines: dict[str, set[int]] = {}
        # every `kernel:` stage written from the output codes: (its key, its title, the kernel's name)
        self.code_kernels: list[tuple[str, str, str]] = []

    def _add(self, key: str, title: str, group: str, fmt: str, value: Any, source_map: list[list[int]],
             meta: dict[str, Any] | None = None) -> None:
        """Write one stage. A key met again (Dynamo's ids start over after torch._dynamo.reset())
        gets `.2`, `.3`, ... appended."""
        unique, n = key, 1
        while unique in self._keys or self.bundle.has(unique):
            n += 1
            unique = f"{key}.{n}"
        self._keys.add(unique)
        names = user_file_names(value, self.user_paths) if self.link_lines else []
        self.bundle.add(unique, title, group, fmt, value, source_map=source_map if self.link_lines else [],
                        meta={**(meta or {}), **({"file_names": names} if names else {})})

    def add(self, entry: torch_trace.TraceEntry) -> None:
        self.entries.append(entry)
        kind = entry.name
        if kind not in _GRAPH_KINDS and kind not in ("inductor_output_code", "dynamo_cpp_guards_str",
                                                     _PROVENANCE_STACKS, _PROVENANCE_NODES):
            return
        cid = _cid(entry)
        state = self._ids.setdefault(cid, _CompileId())
        if kind in _GRAPH_KINDS:
            group = _GRAPH_KINDS[kind][2]
            if group == "Inductor" and not state.has_aot and kind == "after_pre_grad_graph":
                state.held.append(entry)
                return
            if group == "AOTAutograd":
                state.has_backward = state.has_backward or kind == "aot_backward_graph"
                self._graph(cid, state, entry)
                state.has_aot = True
                self._release_held(cid, state)
                return
            self._release_held(cid, state)
            self._graph(cid, state, entry)
        elif kind == "inductor_output_code":
            self._release_held(cid, state)
            state.pending_code.append(entry)
        elif kind == _PROVENANCE_STACKS:
            self._provenance_stacks(state, entry)
            # Inductor writes its provenance once the kernels it names are compiled: the last
            # entry an output code's source map needs.
            self._release_code(cid, state)
        elif kind == _PROVENANCE_NODES:
            self._provenance_nodes(state, entry)
        else:  # dynamo_cpp_guards_str: the frame's recompile reasons came before it
            self._add(f"dynamo.guards:{cid}", f"Guards [{cid}]", "Dynamo", "text", entry.payload,
                      torch_source_map.trailing_location_map(entry.payload, self.user_paths))
            explained = guards_explained(self.entries, cid, self.user_paths)
            if explained is not None:
                recompile = " (recompile)" if explained["recompile"] else ""
                self._add(f"dynamo.guards_explained:{cid}", f"Guards explained [{cid}]{recompile}", "Dynamo", "guards",
                          explained, [],
                          {"recompile": bool(explained["recompile"]), "guards": len(explained["guards"])})

    def finish(self, log_texts: dict[tuple[str, str], str]) -> None:
        """Write what is still held, then the stages only the whole trace can say: recompiles,
        graph breaks, and the artifact logs (`log_texts`: (compile id, artifact) -> text)."""
        for cid, state in self._ids.items():
            self._release_held(cid, state)
            self._release_code(cid, state)
        bundle, entries, user_paths = self.bundle, self.entries, self.user_paths
        records = compile_index.compiles(entries, user_paths)
        if len(records) > 1:  # one compile needs no index
            groups = compile_index.by_call_site(records)
            text, pairs = compile_index.text_and_map(groups)
            self._add("dynamo.compiles", f"{compile_index.TITLE} ({len(records)})", "Dynamo", "text", text, pairs,
                      {"compiles": len(records), "call_sites": [g["line"] for g in groups if g["line"]]})
        recompiles = torch_trace.of_kind(entries, "recompile_reasons")
        if recompiles:
            frames = recompiled_frames(entries, recompiles)
            text = _recompile_summary(frames) + "\n\n".join(
                f"## recompile {n} (compile {e.compile_id})\n"
                + cut_irscope_frames("\n".join(torch_trace.recompile_reasons(e.payload)))
                for n, e in enumerate(recompiles, start=1))
            self._add("dynamo.recompiles", f"Recompiles ({len(recompiles)})", "Dynamo", "text", text,
                      torch_source_map.mention_map(text, user_paths), {"frames": frames})
        breaks = torch_trace.of_kind(entries, "dynamo_graph_break_reason")
        if breaks:
            distinct = distinct_graph_breaks(breaks, user_paths)
            summary = _graph_break_summary(len(breaks), distinct)
            parts, pairs = [summary], [[i, d["line"]] for i, d in _summary_lines(distinct) if d["line"]]
            offset = summary.count("\n") + 1
            for n, entry in enumerate(breaks, start=1):
                reason = cut_irscope_frames(entry.payload.rstrip())
                block = f"## graph break {n} (compile {entry.compile_id})\n{reason}\n"
                line = torch_source_map.graph_break_line(entry.payload, user_paths)
                if line:
                    pairs += [[offset + i, line] for i in range(1, 3)]
                parts.append(block)
                offset += block.count("\n") + 1
            self._add("dynamo.graph_breaks", f"Graph breaks ({len(breaks)})", "Dynamo", "text", "\n".join(parts),
                      pairs, {"count": len(breaks), "distinct": distinct})
        _write_log_stages(bundle, log_texts, torch_trace.compile_ids(entries), user_paths, self.link_lines)

    # --- one stage at a time ----------------------------------------------------------------

    def _graph(self, cid: str, state: _CompileId, entry: torch_trace.TraceEntry) -> None:
        kind = entry.name
        key, title, group = _GRAPH_KINDS[kind]
        i = state.kind_counts.get(kind, 0)
        state.kind_counts[kind] = i + 1
        pairs, nodes = torch_source_map.fx_code_map(entry.payload, self.user_paths)
        state.node_lines = torch_source_map.merge_node_lines(state.node_lines, nodes)
        side = training_side(kind, entry.payload, state)
        stage_key = f"{key}:{cid}" + (".backward" if side == "backward" else f".{i}" if i else "")
        if self.bundle.has(stage_key):  # an inference graph where a forward graph was written
            return
        if side:  # Inductor compiles a training step's forward and backward graphs under one compile id
            title = f"{title} ({side})"
        meta = {}
        if kind == "aot_backward_graph":
            saved = torch_source_map.saved_for_backward(entry.payload)
            meta = {"saved_for_backward": [n for n, _ in saved],
                    "note": f"Saved for backward ({len(saved)}): " + ", ".join(f"{n}: {t}" for n, t in saved)}
        self._add(stage_key, f"{title} [{cid}]", group, "python", entry.payload, pairs, meta)
        if kind == "dynamo_output_graph":
            graph_drawing.add_graph(self.bundle, f"dynamo.fx_graph_drawing:{cid}" + (f".{i}" if i else ""),
                                    f"FX graph drawing [{cid}]", group, fx_graph_dot.to_dot(entry.payload))

    def _release_held(self, cid: str, state: _CompileId) -> None:
        held, state.held = state.held, []
        for entry in held:
            self._graph(cid, state, entry)

    def _provenance_stacks(self, state: _CompileId, entry: torch_trace.TraceEntry) -> None:
        try:
            traces = json.loads(entry.payload)
        except json.JSONDecodeError:
            return
        for name, lines in torch_source_map.kernel_lines_from_provenance(traces, self.user_paths).items():
            state.kernels.setdefault(name, set()).update(lines)

    def _provenance_nodes(self, state: _CompileId, entry: torch_trace.TraceEntry) -> None:
        try:
            mappings = json.loads(entry.payload)
        except json.JSONDecodeError:
            return
        for name, lines in torch_source_map.kernel_lines_from_node_mappings(mappings, state.node_lines).items():
            state.kernels.setdefault(name, set()).update(lines)

    def _release_code(self, cid: str, state: _CompileId) -> None:
        pending, state.pending_code = state.pending_code, []
        for entry in pending:
            suffix = output_code_suffix(entry.payload, state.output_codes)
            state.output_codes += 1
            pairs = torch_source_map.output_code_map(entry.payload, state.node_lines, state.kernels)
            meta = {"file": (entry.data or {}).get("filename", "")}
            if self.output_code_note:
                meta["note"] = self.output_code_note
            # a training step's two output codes say which graph each compiled, as its post-grad graphs do
            side = ("backward" if suffix == ".backward" else "forward") if state.has_backward else ""
            title = f"Output code ({side}) [{cid}]" if side and suffix in ("", ".backward") else \
                f"Output code [{cid}]{suffix}"
            self._add(f"inductor.output_code:{cid}{suffix}", title, "Inductor", "python", entry.payload, pairs, meta)
            if self.link_lines:
                for kernel, lines in torch_source_map.kernel_user_lines(entry.payload, pairs).items():
                    self.kernel_lines.setdefault(kernel, set()).update(lines)
            self.code_kernels += _write_kernel_stages(self.bundle, entry.payload, pairs if self.link_lines else [],
                                                      ".backward" if suffix == ".backward" else "", cid)

    def write_host_kernel_table(self) -> None:
        """`kernels.resources` for Inductor's kernels that run on the host CPU (its C++ kernels): one
        row per kernel with the user's lines it came from, as a GPU job's table has, so the Kernels
        group opens on every kernel. The GPU figures (registers, spills, shared memory, occupancy)
        do not apply and are not shown."""
        rows = [formats.KernelResource(kernel=title, stage=key, target="cpu",
                                       lines=sorted(self.kernel_lines.get(name, ())),
                                       source="the kernels Inductor wrote in its output code")
                for key, title, name in self.code_kernels]
        write_resource_table(self.bundle, rows, "Kernels", title="All kernels", explained_as="host")


def training_side(kind: str, payload: str, state: _CompileId) -> str:
    """Which graph of a training step an Inductor post-grad graph is, "forward" or "backward"
    (its inputs are the gradients AOTAutograd names `tangents_N`), or "" outside training: Inductor
    compiles both under one compile id, so the side is what tells their stages apart."""
    if kind != "inductor_post_grad_graph" or not state.has_backward:
        return ""
    return "backward" if re.search(r"\btangents_\d+\b", payload) else "forward"


def output_code_suffix(payload: str, index: int) -> str:
    """What follows `inductor.output_code:<compile id>` in the key of a compile id's `index`-th
    output code (counted from 0): ".backward" for a backward graph's, ".<index>" after the first."""
    if "backward" in payload.split("\n", 1)[0]:
        return ".backward"
    return "" if index == 0 else f".{index}"


def user_file_names(value: Any, user_paths: tuple[str, ...]) -> list[dict[str, str]]:
    """Stage meta `file_names` for a stage whose text names the user's file (Dynamo's and
    AOTAutograd's `# File: /tmp/.../model.py:18 in forward` comments, the guards, the bytecode):
    that file is the source in the editor (shown beside the stage, as a generated kernel file's
    is: compiler/pytorch/gpu_codegen.py `_file_names`; the text keeps the name). `user_paths[0]` is
    the job's path of the file."""
    if not isinstance(value, str) or not user_paths:
        return []
    path = user_paths[0]
    name = path.rsplit("/", 1)[-1]
    # the name as a path's last part (Dynamo's guard comments cut a path's head: "mp/work/model.py")
    if not re.search(r"(?:^|[/\s\"'(])" + re.escape(name) + r"(?!\w|\.\w)", value):
        return []
    return [{"path": path, "file": name, "name": USERS_FILE_NAME, "about": USERS_FILE_ABOUT.format(file=name)}]


def is_user_path(path: str, user_paths: tuple[str, ...]) -> bool:
    """Whether a path as the trace prints it is the user's file. Dynamo's guard comments cut a
    path's head ("mp/job/model.py"), so a path that ends one of `user_paths` counts too."""
    return torch_source_map._is_user_path(path, user_paths) or any(
        not path.startswith("/") and p.endswith(path) for p in user_paths if "/" in path)


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
        # logged under the compile's first attempt ("0/1") while its guards are its last's ("0/1_1")
        if _base(_cid(e)) != _base(cid):
            continue
        for earlier, reason in dynamo_guards.parse_recompile_reasons(e.payload):
            failures.append(dynamo_guards.explain_failure(earlier, reason, by_cid.get(earlier, []), guards).to_json())
    frame = _frame_of(entries, cid)
    order = ["tensor", "type", "constant", "global", "shape", "other"]
    present = [g for g in order if any(x.group == g for x in guards)]
    return {"compile_id": cid, "frame": frame,
            "groups": {g: dynamo_guards.GROUPS[g] for g in present},
            "guards": [{k: v for k, v in g.to_json().items() if v not in (None, "", {})} for g in guards],
            "recompile": [{k: v for k, v in f.items() if v not in (None, "")} for f in failures],
            "latency_us": dynamo_guards.guard_latency_us(printed[-1].payload),
            "source": "TORCH_TRACE: dynamo_cpp_guards_str (the guard tree Dynamo built) and recompile_reasons "
                      "(the guards that failed)"}


def write_trace(bundle: Bundle, entries: list[torch_trace.TraceEntry], user_paths: tuple[str, ...],
                output_code_note: str = "", link_lines: bool = True) -> None:
    """Every stage of a whole trace at once (a TORCH_TRACE made elsewhere): as the live pipeline
    writes them entry by entry, without the artifact logs only a live compile has."""
    stages = TraceStages(bundle, user_paths, output_code_note=output_code_note, link_lines=link_lines)
    for entry in entries:
        stages.add(entry)
    stages.finish({})


def trace_id(log_id: str, trace_ids: list[str]) -> str:
    """The trace's compile id for a compile id the logging side knew: logging knows "0/0", the trace
    names the attempt that got through ("0/0_1")."""
    if log_id == "?":  # no compile context: AOTInductor on the export path
        return UNFRAMED
    attempts = [t for t in trace_ids if t == log_id or t.startswith(log_id + "_")]
    return attempts[-1] if attempts else log_id


def _write_log_stages(bundle: Bundle, texts: dict[tuple[str, str], str], trace_ids: list[str],
                      user_paths: tuple[str, ...], name_user_file: bool = True) -> None:
    for log_id in dict.fromkeys(c for c, _ in texts):
        cid = trace_id(log_id, trace_ids)
        for artifact, key, title in LOG_STAGES:
            text = texts.get((log_id, artifact))
            if text:
                if artifact.startswith("ir_"):
                    pairs = torch_source_map.ir_block_map(text, user_paths)
                elif artifact == "bytecode":
                    pairs = torch_source_map.bytecode_map(text, user_paths)
                else:
                    pairs = torch_source_map.mention_map(text, user_paths)
                group = "Dynamo" if key.startswith("dynamo.") else "Inductor"
                meta = {}
                if artifact == "bytecode" and "MODIFIED BYTECODE" not in text:
                    # the compile failed before Dynamo generated the frame's new bytecode
                    title, meta = "Bytecode, original only", {"explained_as": "original_only"}
                names = user_file_names(text, user_paths) if name_user_file else []
                if names:
                    meta["file_names"] = names
                bundle.add(f"{key}:{cid}", f"{title} [{cid}]", group, "text", text, source_map=pairs, meta=meta)


def _write_kernel_stages(bundle: Bundle, code: str, pairs: list[list[int]], suffix: str,
                         cid: str) -> list[tuple[str, str, str]]:
    """One `kernel:<name>` stage per kernel defined in an output code, its lines' sources kept
    (`suffix` ".backward" for a backward graph's kernels, whose names may repeat the forward's; a
    recompile's kernel named as an earlier compile's, Inductor's names restarting per graph, is
    `kernel:<name>:<compile id>`); the (key, title, name) of each written."""
    written = []
    for name, (first, last) in torch_source_map.kernel_blocks(code).items():
        lines = code.split("\n")[first:last - 1]  # the kernel's own source, without the Python around it
        header = code.split("\n")[first - 1]
        fmt = "cpp" if "cpp_pybinding" in header or "cpp(" in header else "python"
        kernel_pairs = [[a - first, b] for a, b in pairs if first < a < last]
        short = formats.kernel_key_name(name)
        key, title = f"kernel:{short}", name
        if bundle.has(key) and suffix:  # a backward kernel named as a forward one: its key and title say which
            key, title = key + suffix, name + (" (backward)" if suffix == ".backward" else suffix)
        if bundle.has(key):  # another compile's kernel of the same name (a recompile's, another frame's)
            key, title = f"kernel:{short}:{cid}{suffix}", f"{title} [{cid}]"
        if not bundle.has(key):
            bundle.add(key, title, "Kernels", fmt, "\n".join(lines), source_map=kernel_pairs)
            written.append((key, title, name))
    return written


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


def compile_timings(entries: list[torch_trace.TraceEntry]) -> dict[str, Any]:
    """Seconds per compile phase, summed over compile ids, from the trace's chromium events."""
    begins: dict[tuple[str, str | None], list[float]] = {}
    durations: dict[str, float] = {}
    counts: dict[str, int] = {}
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
            counts[name] = counts.get(name, 0) + 1
    out: dict[str, Any] = {}
    for phase, names in _PHASES:
        if any(n in durations for n in names):
            out[f"{phase}_s"] = round(sum(durations.get(n, 0.0) for n in names), 4)
    out["events"] = {name: round(seconds, 4) for name, seconds in sorted(durations.items(), key=lambda kv: -kv[1])[:40]}
    out["event_counts"] = {name: counts[name] for name in out["events"]}
    out["source"] = "PyTorch's dynamo_timed events in TORCH_TRACE"
    return out


# PyTorch's graph-break text: "Graph Break Reason: ...", the break's title on the line before its
# "  Explanation:", its "  Hint:" lines, and the link to its page on the graph-break site (GB id).
_GB_ID = re.compile(r"/gb/(gb\d+)\.html")


def distinct_graph_breaks(breaks: list[torch_trace.TraceEntry], user_paths: tuple[str, ...]) -> list[dict[str, Any]]:
    """The distinct graph breaks, in the order first met: each one's user line, how many times it
    happened, PyTorch's title, explanation and hints for it, and its graph-break id (GB id). Two
    breaks are the same when they have the same line, id and title (a loop breaks many times)."""
    out: dict[tuple, dict[str, Any]] = {}
    for entry in breaks:
        text = entry.payload
        lines = text.splitlines()
        at = next((i for i, line in enumerate(lines) if line.strip().startswith("Explanation:")), None)
        title = lines[at - 1].strip() if at else next(
            (line.split(":", 1)[1].strip() for line in lines if line.startswith("Graph Break Reason:")), "")
        title = title.removeprefix("Graph Break Reason:").strip()  # a break whose reason is its title
        explanation = lines[at].strip()[len("Explanation:"):].strip() if at is not None else ""
        hints = [line.strip()[len("Hint:"):].strip() for line in lines if line.strip().startswith("Hint:")]
        gb = _GB_ID.search(text)
        line = torch_source_map.graph_break_line(text, user_paths)
        key = (line, gb.group(1) if gb else "", title)
        if key in out:
            out[key]["count"] += 1
            out[key]["compile_ids"].append(entry.compile_id)
        else:
            out[key] = {"line": line, "count": 1, "gb": gb.group(1).upper() if gb else None, "title": title,
                        "explanation": explanation, "hints": hints, "compile_ids": [entry.compile_id]}
    return list(out.values())


def _summary_lines(distinct: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """(line of the summary, break) for each distinct break's first line: the line that maps to
    the user's source line (the summary's heading is line 1)."""
    out, at = [], 2
    for d in distinct:
        out.append((at, d))
        at += 1 + (1 if d["explanation"] else 0) + len(d["hints"][:2])
    return out


def _graph_break_summary(total: int, distinct: list[dict[str, Any]]) -> str:
    """The stage's first block: every distinct graph break on a line of its own (line, count, GB
    id, title), its explanation and its first two hints under it; each break in full follows."""
    head = [f"# {total} graph break{'s' if total != 1 else ''}, {len(distinct)} distinct"]
    for d in distinct:
        where = f"line {d['line']}" if d["line"] else "no line of yours"
        head.append(f"- {where} ×{d['count']}" + (f" {d['gb']}" if d["gb"] else "") + f": {d['title']}")
        if d["explanation"]:
            head.append(f"    {d['explanation']}")
        head.extend(f"    hint: {h}" for h in d["hints"][:2])
    return "\n".join(head) + "\n"


def _frame_of(entries: list[torch_trace.TraceEntry], cid: str) -> str:
    """The function a compile id compiled, as "name at file.py:line" (its dynamo_start's stack top)."""
    for e in entries:  # (dynamo_start is its first attempt's: "0/1" for the stages of "0/1_1")
        if _base(_cid(e)) == _base(cid) and e.kind == "dynamo_start" and isinstance(e.data, dict) \
                and e.data.get("stack"):
            strings = torch_trace.string_table(entries)
            top = e.data["stack"][-1]
            filename = strings.get(top.get("filename"), str(top.get("filename", "")))
            return f"{top.get('name', '?')} at {filename.rsplit('/', 1)[-1]}:{top.get('line', '?')}"
    return ""


def recompiled_frames(entries: list[torch_trace.TraceEntry],
                      recompiles: list[torch_trace.TraceEntry]) -> list[dict[str, Any]]:
    """For each frame that compiled more than once: the function, how many times it compiled, and
    each recompile's compile id with the first line of the reason Dynamo gave (the failed guard)."""
    compiles: dict[str, set[str]] = {}
    for cid in torch_trace.compile_ids(entries):
        frame, _, rest = cid.partition("/")
        compiles.setdefault(frame, set()).add(rest.split("_")[0])
    frames: dict[str, dict[str, Any]] = {}
    last = torch_trace.last_attempts(entries)
    for e in recompiles:
        cid = e.compile_id or ""
        cid = last.get(cid.partition("_")[0], cid)  # as the compile's stages name it
        frame = cid.partition("/")[0]
        record = frames.setdefault(frame, {"frame": frame, "function": _frame_of(entries, f"{frame}/0") or
                                           _frame_of(entries, cid), "compiles": len(compiles.get(frame, ())),
                                           "recompiles": []})
        reasons = torch_trace.recompile_reasons(e.payload)
        reason = torch_trace.reason_line(reasons[0]) if reasons else ""
        record["recompiles"].append({"compile_id": cid, "reason": reason})
    return list(frames.values())


def _recompile_summary(frames: list[dict[str, Any]]) -> str:
    """The stage's first block: each recompiled frame, how many times it compiled, and each
    recompile's failed guard, one line each; every reason in full follows."""
    head = []
    for f in frames:
        head.append(f"# frame {f['frame']}" + (f" ({f['function']})" if f["function"] else "")
                    + f" compiled {f['compiles']} times")
        head.extend(f"- [{r['compile_id']}] {r['reason']}" for r in f["recompiles"])
    return "\n".join(head) + "\n\n"
