"""A TORCH_TRACE directory made elsewhere (the `import` language): its entries written as stages by
trace_stages, the code the `pytorch` pipeline writes its own with, and its compile timings by the
same code."""
from __future__ import annotations

import os
import re
from typing import Any

from compiler.errors import ErrorKind
from compiler.pipeline import JobContext, UserError, first_line
from compiler.pytorch import trace as torch_trace
from compiler.pytorch import trace_stages

_TRACE_LINE = re.compile(r"^[VIWE]\d{4} [\d:.]+ \d+ [^\]]*\] \{")


def torch_trace_files(root: str, files: list[str]) -> list[str]:
    """The files of a TORCH_TRACE directory: glog-prefixed lines each carrying a JSON object."""
    return [f for f in files if _TRACE_LINE.match(first_line(os.path.join(root, f)))]


def recognise(root: str, files: list[str]) -> bool:
    return bool(torch_trace_files(root, files))


def read(ctx: JobContext, root: str, files: list[str]) -> dict[str, Any]:
    """The stages of a TORCH_TRACE, as the `pytorch` pipeline writes them (trace_stages)."""
    logs = torch_trace_files(root, files)
    if not logs:
        raise UserError(ErrorKind.InputError, "no TORCH_TRACE log in the archive: its files are glog lines, each "
                                              "with a JSON object (the files torch writes to the TORCH_TRACE "
                                              "directory)")
    entries: list[torch_trace.TraceEntry] = []
    for name in sorted(logs):
        with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
            entries.extend(torch_trace.parse(f.read()))
    if not entries:
        raise UserError(ErrorKind.InputError, "the TORCH_TRACE logs hold no entry")
    # The compiled frames' files are the user's (their lines are named in guards, graph breaks, ...).
    strings = torch_trace.string_table(entries)
    user_files: list[str] = []
    for e in torch_trace.of_kind(entries, "dynamo_start"):
        stack = (e.data or {}).get("stack") if isinstance(e.data, dict) else None
        if stack:
            name = strings.get(stack[-1].get("filename"), str(stack[-1].get("filename", "")))
            if name and name not in user_files:
                user_files.append(name)
    # The editor holds the upload's description, not the user's file: no source line to tint.
    before = len(ctx.bundle.manifest.stages)
    trace_stages.write_trace(ctx.bundle, entries, tuple(user_files), link_lines=False)
    timings = trace_stages.compile_timings(entries)
    timings["source"] = "the imported TORCH_TRACE's dynamo_timed events (compile phases on the machine that made it)"
    ctx.bundle.timing("compile", timings)
    metrics = [e.data for e in torch_trace.of_kind(entries, "compilation_metrics") if isinstance(e.data, dict)]
    version = next((m.get("pytorch_version") for m in metrics if m.get("pytorch_version")), None)
    codes = [e.payload for e in torch_trace.of_kind(entries, "inductor_output_code")]
    graphs = [e.payload for e in torch_trace.of_kind(entries, "inductor_post_grad_graph", "aot_inference_graph",
                                                     "aot_forward_graph")]
    device = _torch_device(codes, graphs)
    return {"log": "TORCH_TRACE", "made_by": f"torch {version}" if version else "torch (version not in the log)",
            "device": device, "trace_files": len(logs), "entries": len(entries), "compiled_files": user_files,
            "stages": len(ctx.bundle.manifest.stages) - before}


def _torch_device(codes: list[str], graphs: list[str]) -> str:
    """Where the log's compiled code runs, as Inductor's output code (else the graphs' devices) say."""
    text = "\n".join(codes)
    arch = re.search(r"cc=(\d+)", text) or re.search(r"'cc': (\d+)", text)
    if "device_str='cuda'" in text or "torch.cuda" in text:
        return f"a CUDA GPU (sm_{arch.group(1)})" if arch else "a CUDA GPU"
    if "device_str='hip'" in text:
        return "an AMD GPU"
    if codes:
        return "the CPU"
    graph_text = "\n".join(graphs)
    if "device(type='cuda'" in graph_text or "cuda:0" in graph_text:
        return "a CUDA GPU (from the graphs' devices; the log has no Inductor output code)"
    if graph_text:
        return "the CPU (from the graphs' devices; the log has no Inductor output code)"
    return "unknown (the log has no graph)"
