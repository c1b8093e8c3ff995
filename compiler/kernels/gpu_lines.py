"""Compiler line info -> source maps for the GPU stages of a Triton kernel.

Every function takes an artifact's text and the path of the user's source file as the compiler
recorded it, and returns pairs [artifact_line, source_line] (both 1-based) for the artifact lines
whose location is in that file. The locations are the compiler's own:

* MLIR (TTIR, TTGIR, pass dumps): `loc(...)` attributes, read by compiler/mlir_text.py;
* LLVM IR: `!dbg !N` -> `!DILocation` -> scope -> `!DIFile`;
* PTX: `.file N "path"` and `.loc N line col` directives;
* SASS: the `//## File "path", line N` comments `nvdisasm --print-line-info` writes.

Where a location is a call site (an inlined `@triton.jit` helper) the first frame in the user's
file wins, so a line inside a helper the user wrote maps to that helper's line.

The `*_location_chains` functions read the same line info without choosing a file: artifact line ->
location chains (frames (file, line, column) innermost first), for linking the lines of one IR
stage to the lines they became in the next (compiler/formats.py `ir_locations`), also where no
frame is in the user's file.
"""
from __future__ import annotations

import os
import re
from typing import Iterable

from compiler.mlir_text import Chain, Frame, SourceMap
from compiler.mlir_text import same_file as _same_file

_LLVM_META = re.compile(r"^(![0-9]+)\s*=\s*(?:distinct\s+)?!(\w+)\((.*)\)\s*$")
_LLVM_FIELD = re.compile(r'(\w+):\s*("(?:[^"\\]|\\.)*"|![0-9]+|[^,]+)')
_LLVM_DBG = re.compile(r"!dbg (![0-9]+)")


def _llvm_metadata(text: str) -> dict[str, tuple[str, dict[str, str]]]:
    """`!N` -> (kind, fields) of LLVM IR's metadata nodes (`!DILocation(line: 8, ...)`)."""
    meta: dict[str, tuple[str, dict[str, str]]] = {}
    for line in text.splitlines():
        m = _LLVM_META.match(line)
        if m:
            meta[m.group(1)] = (m.group(2), {k: v.strip() for k, v in _LLVM_FIELD.findall(m.group(3))})
    return meta


def _llvm_file_of(meta: dict[str, tuple[str, dict[str, str]]], ref: str, depth: int = 0) -> str | None:
    """The path of the DIFile a scope (or the file itself) refers to."""
    kind, fields = meta.get(ref, ("", {}))
    if kind == "DIFile":
        name = fields.get("filename", '""').strip('"')
        directory = fields.get("directory", '""').strip('"')
        return name if name.startswith("/") or not directory else os.path.join(directory, name)
    if depth > 50:
        return None
    nxt = fields.get("file") or fields.get("scope")
    return _llvm_file_of(meta, nxt, depth + 1) if nxt else None


def _int_field(fields: dict[str, str], name: str) -> int | None:
    try:
        return int(fields.get(name, "0")) or None
    except ValueError:
        return None


def llvm_location_chains(text: str) -> dict[int, list[Chain]]:
    """Artifact line -> the chain of its `!dbg` location: the DILocation, then its `inlinedAt`
    call sites; a `define` with a DISubprogram gets the function's line (no column)."""
    meta = _llvm_metadata(text)
    out: dict[int, list[Chain]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("!"):
            continue
        m = _LLVM_DBG.search(line)
        if not m:
            continue
        frames: list[Frame] = []
        ref = m.group(1)
        for _ in range(32):
            kind, fields = meta.get(ref, ("", {}))
            if kind == "DISubprogram" and not frames:
                path, at = _llvm_file_of(meta, ref), _int_field(fields, "line")
                if path and at:
                    frames.append((path, at, None))
                break
            if kind != "DILocation":
                break
            path, at = _llvm_file_of(meta, fields.get("scope", "")), _int_field(fields, "line")
            if not path or not at:
                break
            frames.append((path, at, _int_field(fields, "column")))
            ref = fields.get("inlinedAt", "")
            if not ref:
                break
        if frames:
            out[number] = [tuple(frames)]
    return out


def llvm_source_map(text: str, source_file: str) -> SourceMap:
    """Source map of LLVM IR with debug info (`!dbg` on instructions and on `define`)."""
    meta = _llvm_metadata(text)

    def file_of(ref: str) -> str | None:
        return _llvm_file_of(meta, ref)

    def user_line(ref: str) -> int | None:
        for _ in range(100):  # the inlinedAt chain, callee first
            kind, fields = meta.get(ref, ("", {}))
            if kind == "DILocation":
                scope = fields.get("scope", "")
                f = file_of(scope)
                if f and _same_file(f, source_file):
                    return int(fields.get("line", "0")) or None
                ref = fields.get("inlinedAt", "")
                if not ref:
                    return None
            elif kind == "DISubprogram":
                f = file_of(ref)
                return int(fields.get("line", "0")) or None if f and _same_file(f, source_file) else None
            else:
                return None
        return None

    pairs: SourceMap = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("!"):
            continue
        m = _LLVM_DBG.search(line)
        if m:
            hit = user_line(m.group(1))
            if hit:
                pairs.append([number, hit])
    return pairs


_PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"(?:\s*,\s*\d+\s*,\s*\d+)?(?:\s+"([^"]*)")?')
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")
_PTX_INLINED_AT = re.compile(r"\binlined_at\s+(\d+)\s+(\d+)\s+(\d+)")


def _ptx_files(lines: list[str]) -> dict[str, str]:
    """PTX's `.file N "dir", "name"` table: file number -> path."""
    files: dict[str, str] = {}
    for line in lines:
        m = _PTX_FILE.match(line)
        if m:
            files[m.group(1)] = os.path.join(m.group(2), m.group(3)) if m.group(3) else m.group(2)
    return files


def ptx_location_chains(text: str) -> dict[int, list[Chain]]:
    """Artifact line -> the chain of the `.loc` in force: `.loc F L C` (column 0: none), with
    `inlined_at F2 L2 C2` as its caller. PTX names one caller only; where the caller is itself
    inlined, its own caller is taken from the `.loc` lines that say where it is inlined, when they
    all agree (else the chain stops there). Inline-asm blocks keep the `.loc` before the block,
    as in `ptx_source_map`."""
    lines = text.splitlines()
    files = _ptx_files(lines)

    def frame(f: str, line: str, col: str) -> Frame | None:
        path = files.get(f)
        return (path, int(line), int(col) or None) if path is not None and int(line) else None

    raw: dict[int, tuple[Frame, ...]] = {}
    callers: dict[Frame, set[Frame]] = {}
    current: tuple[Frame, ...] | None = None
    in_asm, asm_chain = False, None
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith(".section") or stripped.startswith(".file") or stripped.startswith("}"):
            current = None
            continue
        if stripped == "// begin inline asm":
            in_asm, asm_chain = True, current
            continue
        if stripped == "// end inline asm":
            in_asm, current = False, asm_chain
            continue
        m = _PTX_LOC.match(line)
        if m and in_asm:
            continue  # a counted inline-asm line, not a source location
        if m:
            leaf = frame(*m.groups())
            at = _PTX_INLINED_AT.search(line)
            caller = frame(*at.groups()) if at else None
            if leaf and caller:
                callers.setdefault(leaf, set()).add(caller)
            current = (leaf, caller) if leaf and caller else (leaf,) if leaf else None
        chain = asm_chain if in_asm else current
        if chain and stripped and (m or not stripped.startswith("//")):
            raw[number] = chain
    out: dict[int, list[Chain]] = {}
    for number, chain in raw.items():
        frames = list(chain)
        while len(frames) < 32:
            up = callers.get(frames[-1], set())
            if len(up) != 1 or next(iter(up)) in frames:
                break
            frames.append(next(iter(up)))
        out[number] = [tuple(frames)]
    return out


def ptx_source_map(text: str, source_file: str) -> SourceMap:
    """Source map of PTX from its `.loc` directives: each line under a `.loc` whose file is
    `source_file` (the innermost frame's), read by `ptx_location_chains`.

    LLVM numbers the lines of a multi-line inline-asm string as if they were source lines (each
    asm line gets the previous `.loc` line + 1), so inside `// begin inline asm` ... `// end inline
    asm` the `.loc` that preceded the block is used instead of those counted ones."""
    pairs: SourceMap = []
    for number, chains in sorted(ptx_location_chains(text).items()):
        path, line, _ = chains[0][0]
        if _same_file(path, source_file):
            pairs.append([number, line])
    return pairs


def ptx_inline_asm_lines(text: str, source_file: str) -> dict[int, int]:
    """counted line -> real line, for the line LLVM's inline-asm counting gives the last
    instruction of each inline-asm block (Triton's loads and stores: the memory op comes last).
    ptxas keeps the counted line, so SASS shows the load of line 11 at line 14; this table undoes
    that where it is unambiguous (a counted line that two blocks disagree on is left out)."""
    lines = text.splitlines()
    files = _ptx_files(lines)
    found: dict[int, set[int]] = {}
    real: int | None = None
    counted: int | None = None
    last: int | None = None
    in_asm = False
    for line in lines:
        stripped = line.strip()
        if stripped == "// begin inline asm":
            in_asm, counted, last = True, real, None
            continue
        if stripped == "// end inline asm":
            if real and last:
                found.setdefault(last, set()).add(real)
            in_asm = False
            continue
        m = _PTX_LOC.match(line)
        if m:
            f = files.get(m.group(1))
            value = int(m.group(2)) if f is not None and _same_file(f, source_file) else None
            if in_asm:
                counted = value
            else:
                real = value
            continue
        if in_asm and stripped and not stripped.startswith("//"):
            last = counted
    return {c: next(iter(r)) for c, r in found.items() if len(r) == 1 and c not in r}


_SASS_FILE = re.compile(r'//## File "([^"]*)", line (\d+)(?:.*?inlined at "([^"]*)", line (\d+))?')
_SASS_INSN = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/")


def sass_source_map(text: str, source_file: str, valid_lines: Iterable[int] | None = None,
                    asm_lines: dict[int, int] | None = None) -> SourceMap:
    """Source map of `nvdisasm --print-line-info` output.

    `valid_lines`, when given (the user lines the LLVM IR's debug info names), filters out lines
    that only exist because of the inline-asm line counting described in `ptx_source_map`; such a
    line found in `asm_lines` (from `ptx_inline_asm_lines`) is mapped to its real line instead."""
    valid = set(valid_lines) if valid_lines is not None else None
    fix = asm_lines or {}
    pairs: SourceMap = []
    current: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        m = _SASS_FILE.search(line)
        if m:
            current = None
            for f, ln in ((m.group(1), m.group(2)), (m.group(3), m.group(4))):
                if f is not None and _same_file(f, source_file):
                    current = int(ln)
                    break
            if current is not None and valid is not None and current not in valid:
                current = fix.get(current)
            continue
        if line.startswith("//----") or line.lstrip().startswith(".section"):
            current = None
            continue
        if current and _SASS_INSN.match(line):
            pairs.append([number, current])
    return pairs


def sass_location_chains(text: str, source_file: str | None = None, valid_lines: Iterable[int] | None = None,
                         asm_lines: dict[int, int] | None = None) -> dict[int, list[Chain]]:
    """Artifact line -> the chain of nvdisasm's `//## File "f", line N [inlined at "g", line M]`
    in force (lines only: nvdisasm prints no column). A line of `source_file` outside
    `valid_lines` is corrected through `asm_lines` or dropped, as in `sass_source_map`."""
    valid = set(valid_lines) if valid_lines is not None else None
    fix = asm_lines or {}

    def checked(path: str, line: int) -> int | None:
        if source_file is not None and valid is not None and _same_file(path, source_file) and line not in valid:
            return fix.get(line)
        return line

    out: dict[int, list[Chain]] = {}
    current: Chain | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        m = _SASS_FILE.search(line)
        if m:
            frames: list[Frame] = []
            for path, ln in ((m.group(1), m.group(2)), (m.group(3), m.group(4))):
                if path is None:
                    break
                at = checked(path, int(ln))
                if not at:
                    break
                frames.append((path, at, None))
            current = tuple(frames) or None
            continue
        if line.startswith("//----") or line.lstrip().startswith(".section"):
            current = None
            continue
        if current and _SASS_INSN.match(line):
            out[number] = [current]
    return out


def source_lines(source_map: SourceMap) -> set[int]:
    """The user lines a source map reaches."""
    return {src for _, src in source_map}
