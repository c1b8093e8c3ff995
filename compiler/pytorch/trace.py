"""PyTorch's structured trace (TORCH_TRACE) -> records. Pure functions, no torch import.

A trace file is glog-prefixed lines, each carrying one JSON object; an entry that has a payload
(`has_payload`) is followed by the payload's lines, each indented by one tab. tlparse reads the
same format; we keep every entry and let the pipeline pick the ones it shows.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Iterable

# Keys of an entry's JSON object that describe where it came from rather than what it is.
_CONTEXT_KEYS = {"frame_id", "frame_compile_id", "attempt", "compiled_autograd_id", "has_payload", "rank",
                 "stack"}


@dataclass
class TraceEntry:
    kind: str  # the entry's main key: dynamo_output_graph, artifact, compilation_metrics, ...
    data: Any  # that key's value
    context: dict[str, Any]
    payload: str
    timestamp: str  # the glog time, "15:58:27.169000"

    @property
    def compile_id(self) -> str | None:
        """tlparse's compile id: "frame/compile", with "_attempt" when Dynamo restarted."""
        frame, compile_ = self.context.get("frame_id"), self.context.get("frame_compile_id")
        if frame is None or compile_ is None:
            return None
        cid = f"{frame}/{compile_}"
        if self.context.get("compiled_autograd_id") is not None:
            cid = f"!{self.context['compiled_autograd_id']}/{cid}"
        attempt = self.context.get("attempt") or 0
        return f"{cid}_{attempt}" if attempt else cid

    @property
    def name(self) -> str:
        """For `artifact` entries, the artifact's name; otherwise the kind."""
        if self.kind == "artifact" and isinstance(self.data, dict):
            return str(self.data.get("name", "artifact"))
        return self.kind


def parse(text: str) -> list[TraceEntry]:
    """Every entry of one trace file, in order. Lines that are not entries are skipped."""
    entries: list[TraceEntry] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        cut = line.find("] {")
        if cut < 0 or line.startswith("\t"):
            continue
        try:
            obj = json.loads(line[cut + 2:])
        except json.JSONDecodeError:
            continue
        payload_lines = []
        if "has_payload" in obj:
            while i < len(lines) and lines[i].startswith("\t"):
                payload_lines.append(lines[i][1:])
                i += 1
        main = [k for k in obj if k not in _CONTEXT_KEYS]
        kind = main[0] if main else "unknown"
        parts = line[:cut].split()
        entries.append(TraceEntry(kind=kind, data=obj.get(kind), context={k: obj[k] for k in obj if k != kind},
                                  payload="\n".join(payload_lines), timestamp=parts[1] if len(parts) > 1 else ""))
    return entries


def read_dir(directory: str) -> list[TraceEntry]:
    """Entries of every trace file in a TORCH_TRACE directory (one file per process)."""
    entries: list[TraceEntry] = []
    if not os.path.isdir(directory):
        return entries
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                entries.extend(parse(f.read()))
    return entries


def string_table(entries: Iterable[TraceEntry]) -> dict[int, str]:
    """The interned file names that stack frames refer to by number."""
    table: dict[int, str] = {}
    for e in entries:
        if e.kind == "str" and isinstance(e.data, list) and len(e.data) == 2:
            table[int(e.data[1])] = str(e.data[0])
    return table


def of_kind(entries: Iterable[TraceEntry], *names: str) -> list[TraceEntry]:
    """Entries whose kind (or artifact name) is one of `names`, in trace order."""
    wanted = set(names)
    return [e for e in entries if e.kind in wanted or (e.kind == "artifact" and e.name in wanted)]


def compile_ids(entries: Iterable[TraceEntry]) -> list[str]:
    """Compile ids in the order their compilation started."""
    seen: dict[str, None] = {}
    for e in entries:
        cid = e.compile_id
        if cid is not None:
            seen.setdefault(cid, None)
    return list(seen)


def recompile_reasons(payload: str) -> list[str]:
    """A `recompile_reasons` artifact's reasons, most recent compile's first: Dynamo writes one
    reason as its text, and several (one per earlier compile whose guards failed) as a JSON list."""
    text = payload.strip()
    if text.startswith("["):
        try:
            reasons = json.loads(text)
        except json.JSONDecodeError:
            reasons = None
        if isinstance(reasons, list):
            return [str(r).strip() for r in reasons if str(r).strip()]
    return [text] if text else []


def reason_line(reason: str) -> str:
    """A guard failure's first line, its runs of spaces (Dynamo pads a guard to its source comment)
    made one."""
    first = next((line for line in reason.splitlines() if line.strip()), "")
    return " ".join(first.split())


def last_attempts(entries: Iterable[TraceEntry]) -> dict[str, str]:
    """Each compile ("0/1") -> the id of its last attempt ("0/1_1" where Dynamo restarted its
    analysis, as the compile's stages are keyed), in the order compiles started."""
    last: dict[str, str] = {}
    for cid in compile_ids(entries):
        base, _, attempt = cid.partition("_")
        if base not in last or int(attempt or 0) > int(last[base].partition("_")[2] or 0):
            last[base] = cid
    return last
