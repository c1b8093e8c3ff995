"""Source maps of XLA's artifacts: HLO instructions through their metadata (stack frames,
source_file/source_line, op names) and StableHLO through its MLIR locations."""
from __future__ import annotations

import re

from compiler import mlir_text
from compiler.xla.hlo_text import HloText, parse_metadata


def mlir_source_map(text: str, user_file: str) -> list[list[int]]:
    """[artifact line, user line] for each op line whose location reaches `user_file`."""
    return mlir_text.source_map(text, user_file)


def stack_frames(text: str) -> dict[int, list[tuple[str, int]]]:
    """The module's stack-frame tables (FileNames, FunctionNames, FileLocations, StackFrames,
    printed before the computations) -> frame id -> [(file, line)], innermost frame first."""
    tables: dict[str, dict[int, str]] = {}
    section = None
    for line in text.split("\n"):
        s = line.strip()
        if s in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = s
            tables[s] = {}
            continue
        if section is None:
            continue
        m = re.match(r"^(\d+)\s+(.*)$", s)
        if not m:
            if s.startswith("%") or s.startswith("ENTRY") or "{" in s and "=" not in s.split("{")[0]:
                section = None
            continue
        tables[section][int(m.group(1))] = m.group(2)
    files = {k: v.strip('"') for k, v in tables.get("FileNames", {}).items()}
    locations = {}
    for k, v in tables.get("FileLocations", {}).items():
        md = parse_metadata(v)
        if md.get("file_name_id", "").isdigit() and md.get("line", "").isdigit():
            locations[k] = (files.get(int(md["file_name_id"]), ""), int(md["line"]))
    frames = {}
    for k, v in tables.get("StackFrames", {}).items():
        md = parse_metadata(v)
        frames[k] = (int(md.get("file_location_id", 0)), int(md.get("parent_frame_id", 0)))
    out: dict[int, list[tuple[str, int]]] = {}
    for k in frames:
        chain, seen, cur = [], set(), k
        while cur in frames and cur not in seen:
            seen.add(cur)
            loc, parent = frames[cur]
            if loc in locations:
                chain.append(locations[loc])
            cur = parent
        out[k] = chain
    return out


def hlo_source_map(module: HloText, user_file: str | None = None,
                   names: dict[str, int] | None = None, text: str | None = None) -> list[list[int]]:
    """[artifact line, user line] for HLO instructions: by the metadata's stack frame (or
    source_file/source_line) when it reaches `user_file` (JAX input; `text` holds the frame
    tables), else by instruction name or metadata op_name defined on a line of the user's HLO
    (`names`: name -> line)."""
    frames = stack_frames(text) if (user_file and text) else {}
    pairs = []
    for ins in module.instructions():
        md = ins.metadata
        line = None
        if user_file and md.get("stack_frame_id", "").isdigit():
            line = next((ln for f, ln in frames.get(int(md["stack_frame_id"]), []) if f == user_file), None)
        if line is None and user_file and md.get("source_file") == user_file and md.get("source_line", "").isdigit():
            line = int(md["source_line"])
        elif line is None and names:
            line = names.get(md.get("op_name", "")) or names.get(ins.name)
        if line:
            pairs.append([ins.line, line])
    return pairs


def mlir_name_map(text: str, names: dict[str, int]) -> list[list[int]]:
    """[artifact line, user line] for op lines whose location is a name defined in the user's
    HLO (hlo_to_stablehlo keeps each instruction's name as a NameLoc)."""
    named = mlir_text.location_names(text)
    pairs = []
    for number, line in enumerate(text.split("\n"), start=1):
        if mlir_text.is_alias_line(line):
            continue
        for _, _, body in mlir_text.locations_on_line(line):
            body = body.strip()
            name = named.get(body) if body.startswith("#") else (body[1:-1] if body[:1] == body[-1:] == '"' else None)
            if name in names:
                pairs.append([number, names[name]])
                break
    return pairs


def call_site(text: str, user_file: str, first: int, last: int) -> int | None:
    """The user's line that called the function a StableHLO module was traced from, the function's
    source spanning lines `first`..`last` of `user_file`: in each op's location chain (innermost
    frame first, as JAX records the Python stack), the frame of the user's file just outside the
    function's own lines; the line most ops name. None when no chain reaches past the function
    (JAX cuts the stack it records, and a nested jit's ops start at its own boundary)."""
    counts: dict[int, int] = {}
    for chains in mlir_text.line_location_chains(text).values():
        for chain in chains:
            lines = [line for file, line, _ in chain if mlir_text.same_file(file, user_file)]
            inside = [k for k, line in enumerate(lines) if first <= line <= last]
            if inside and inside[-1] + 1 < len(lines):
                caller = lines[inside[-1] + 1]
                counts[caller] = counts.get(caller, 0) + 1
    return max(counts, key=lambda line: (counts[line], -line)) if counts else None
