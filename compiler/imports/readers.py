"""What an unpacked upload holds, and the stages of each kind of log, written by the code the live
pipelines use. Each reader returns what the page says about where the log came from."""
from __future__ import annotations

import os
import re
from typing import Any

from compiler.errors import ErrorKind
from compiler.pipeline import JobContext, UserError

_TRACE_LINE = re.compile(r"^[VIWE]\d{4} [\d:.]+ \d+ [^\]]*\] \{")


def _first_line(path: str, limit: int = 1 << 20) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.readline(limit)


def torch_trace_files(root: str, files: list[str]) -> list[str]:
    """The files of a TORCH_TRACE directory: glog-prefixed lines each carrying a JSON object."""
    return [f for f in files if _TRACE_LINE.match(_first_line(os.path.join(root, f)))]


def recognise(root: str, files: list[str]) -> str | None:
    """torch_trace, tritonparse, xla_dump or None, from the files themselves."""
    from compiler.imports.tritonparse import looks_like_tritonparse
    from compiler.xla import dump_index
    if torch_trace_files(root, files):
        return "torch_trace"
    if any(looks_like_tritonparse(_first_line(os.path.join(root, f))) for f in files):
        return "tritonparse"
    if dump_index.index_dump(os.path.basename(f) for f in files) is not None:
        return "xla_dump"
    return None


def import_torch_trace(ctx: JobContext, root: str, files: list[str]) -> dict[str, Any]:
    """The stages of a TORCH_TRACE, as the `pytorch` pipeline writes them (trace_stages)."""
    from compiler.pytorch import trace as torch_trace
    from compiler.pytorch import trace_stages
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


def import_tritonparse(ctx: JobContext, root: str, files: list[str]) -> dict[str, Any]:
    """The stages of each compilation in a TritonParse trace, as the `triton` pipeline writes a
    kernel's (kernel_stages), source maps pointing into the kernel's own source."""
    from compiler.imports.tritonparse import looks_like_tritonparse, read_events
    from compiler.kernel_resources import write_resource_table
    from compiler.triton.capture import qualifiers
    from compiler.triton.kernel_stages import write_kernel_stages
    traces = [f for f in files if looks_like_tritonparse(_first_line(os.path.join(root, f)))]
    if not traces:
        raise UserError(ErrorKind.InputError, "no TritonParse trace in the upload: a trace is one JSON event per line "
                                              "with event_type and payload (tritonparse.structured_logging)")
    files_dir = os.path.join(ctx.workdir, "tritonparse-files")
    compilations, launches, skipped = [], [], 0
    for name in sorted(traces):
        with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
            trace = read_events(f, os.path.join(files_dir, str(len(compilations))))
        compilations += trace.compilations
        launches += trace.launches
        skipped += trace.skipped
    if not compilations:
        raise UserError(ErrorKind.InputError, "the TritonParse trace holds no compilation event")
    records = [r for r, _ in compilations]
    rows = []
    for record, qualifier in zip(records, qualifiers(records)):
        first = record.def_line
        ctx.bundle.progress(f"writing stages of {qualifier}")
        rows.append(write_kernel_stages(ctx.bundle, record, qualifier, ctx.workdir, record.source_file,
                            python_source=(record.source, first) if record.source else None,
                            map_to_user=lambda line, first=first: line - first + 1 if line >= first else None,
                            extra_meta={"imported": True, "source_map_into": f"triton.source:{qualifier}",
                                        "note": "imported from a TritonParse trace: source maps point into the "
                                                "kernel's source (triton.source); no SASS (the trace names the "
                                                "cubin on the machine that made it)"}))
    write_resource_table(ctx.bundle, rows, "Triton", note="from the trace's metadata: a trace without the cubin "
                                                          "or ptxas's log has no register or spill counts")
    if launches:
        ctx.bundle.add("triton.launches", "Launches", "Run", "json", launches, meta={"count": len(launches)})
    versions = sorted({str(r.metadata.get("triton_version")) for r in records if r.metadata.get("triton_version")})
    targets = sorted({_target(r.metadata.get("target")) for r in records})
    return {"log": "TritonParse trace", "made_by": "triton " + ", ".join(versions) if versions else "triton",
            "device": ", ".join(targets), "compilations": len(records), "launches": len(launches),
            "skipped_lines": skipped}


def _target(target: Any) -> str:
    if isinstance(target, dict):
        backend, arch = target.get("backend"), target.get("arch")
        return f"cuda:sm_{arch}" if backend == "cuda" else f"{backend}:{arch}"
    return str(target)


def import_xla_dump(ctx: JobContext, root: str, files: list[str]) -> dict[str, Any]:
    """The stages of an XLA dump directory, as the XLA pipelines write them (dump_stages)."""
    from compiler.xla import dump_index, dump_stages
    # A dump holds every module the program compiled (JAX compiles small helpers too): the one with
    # the most pass snapshots is the program's own; the others are listed.
    best: tuple[int, str, list[str]] | None = None
    modules: list[str] = []
    for folder in sorted({os.path.dirname(f) for f in files}):
        names = [os.path.basename(f) for f in files if os.path.dirname(f) == folder]
        by_module: dict[str, list[str]] = {}
        for name in names:
            m = re.match(r"^(module_\d+\.[^.]+)\.", name)
            if m:
                by_module.setdefault(m.group(1), []).append(name)
        for module, members in by_module.items():
            modules.append(module)
            snapshots = sum(1 for n in members if dump_index.parse_snapshot_name(n) is not None)
            if best is None or snapshots > best[0]:
                best = (snapshots, folder, members)
    index = dump_index.index_dump(best[2]) if best else None
    if best is None or index is None:
        raise UserError(ErrorKind.InputError, "no XLA dump in the upload: a dump directory holds "
                                              "module_*.before_optimizations.txt and the pass snapshots of "
                                              "--xla_dump_to")
    directory = os.path.join(root, best[1])
    written = dump_stages.write_dump_stages(ctx.bundle, index, directory)
    names = " ".join(os.listdir(directory))
    platform = "a GPU" if re.search(r"\.(?:ptx|sm_\d+)", names) or "gpu" in names.lower() else "the CPU"
    return {"log": "XLA dump", "made_by": "XLA (a dump names no version)", "module": index.prefix,
            "device": platform, "stages": written, "other_modules": [m for m in modules if m != index.prefix][:50]}


def describe(origin: dict[str, Any]) -> str:
    """One sentence: where an imported log came from."""
    return (f"imported {origin.get('log', 'log')} from {origin.get('archive', '?')}, made by "
            f"{origin.get('made_by', '?')} on {origin.get('device', '?')}")

