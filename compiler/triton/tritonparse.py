"""TritonParse traces (tritonparse.structured_logging: one JSON event per line, `.ndjson`, maybe
gzipped) -> the compilations in them, as the CompiledRecords Triton's own hooks give the live
`triton` pipeline (compiler/kernels/capture.py), so the same code writes their stages.

A `compilation` event carries the kernel's Python source (`python_source`), Triton's metadata,
its stage times and the text of each stage file (`file_content`: ttir, ttgir, llir, ptx or
amdgcn, the metadata JSON). Binary files (cubin, hsaco) are named in `file_path` only, on the
machine that made the trace, so no SASS comes from an import. `launch` events (recorded with
enable_trace_launch) are kept as they are.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Iterable

from compiler.kernels.capture import CompiledRecord

_TEXT_STAGES = ("source", "ttir", "ttgir", "llir", "ptx", "amdgcn", "json")


@dataclass
class TritonParseTrace:
    compilations: list[tuple[CompiledRecord, dict[str, Any]]] = field(default_factory=list)  # (record, event)
    launches: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0  # lines that are not JSON events


def looks_like_tritonparse(first_line: str) -> bool:
    try:
        event = json.loads(first_line)
    except ValueError:
        return False
    return isinstance(event, dict) and "event_type" in event and "payload" in event


def read_events(lines: Iterable[str], files_dir: str) -> TritonParseTrace:
    """Every compilation (its stage files written under `files_dir`, as Triton's cache would hold
    them) and every launch of a trace, in order."""
    trace = TritonParseTrace()
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            trace.skipped += 1
            continue
        if not isinstance(event, dict):
            trace.skipped += 1
            continue
        if event.get("event_type") == "compilation":
            record = _record(event, files_dir, len(trace.compilations))
            if record is not None:
                trace.compilations.append((record, event))
        elif event.get("event_type") == "launch":
            trace.launches.append(event)
    return trace


def _safe_file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in os.path.basename(name))[:120] or "file"


def _record(event: dict[str, Any], files_dir: str, number: int) -> CompiledRecord | None:
    payload = event.get("payload")
    if not isinstance(payload, dict):
        return None
    metadata = payload.get("metadata") if isinstance(payload.get("metadata"), dict) else {}
    contents = payload.get("file_content") if isinstance(payload.get("file_content"), dict) else {}
    kernel_meta: dict[str, Any] = {}
    for name, text in contents.items():
        if str(name).endswith(".json") and isinstance(text, str):
            try:
                kernel_meta = json.loads(text)
            except ValueError:
                pass
    merged = {**metadata, **(kernel_meta if isinstance(kernel_meta, dict) else {})}
    name = str(merged.get("name") or next((str(k).rsplit(".", 1)[0] for k in contents), "kernel"))
    directory = os.path.join(files_dir, f"{number:04d}")
    os.makedirs(directory, exist_ok=True)
    files: dict[str, str] = {}
    for file_name, text in contents.items():
        ext = str(file_name).rsplit(".", 1)[-1]
        if ext not in _TEXT_STAGES or not isinstance(text, str):
            continue
        path = os.path.join(directory, _safe_file_name(str(file_name)))
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        files[os.path.basename(path)] = path
    source = payload.get("python_source") if isinstance(payload.get("python_source"), dict) else {}
    # Triton's CompileTimes, as the listener got them (compiler/kernels/capture.py reads the same)
    times = merged.get("times") if isinstance(merged.get("times"), dict) else {}
    times_us: dict[str, int] = {}
    for key, value in times.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            times_us[str(key)] = int(value)
        elif key == "lowering_stages" and isinstance(value, list):
            times_us.update({str(p[0]): int(p[1]) for p in value
                             if isinstance(p, list) and len(p) == 2 and isinstance(p[1], (int, float))})
    return CompiledRecord(
        hash=str(merged.get("hash", f"import-{number}")), name=name, files=files, metadata=merged,
        times_us=times_us,
        source=str(source.get("code", "")), source_file=str(source.get("file_path", "")),
        def_line=int(source.get("start_line") or 1), complete=True)
