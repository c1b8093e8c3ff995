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
"""
from __future__ import annotations

import os
import re
from typing import Iterable

from compiler.mlir_text import SourceMap, same_file as _same_file

_LLVM_META = re.compile(r"^(![0-9]+)\s*=\s*(?:distinct\s+)?!(\w+)\((.*)\)\s*$")
_LLVM_FIELD = re.compile(r'(\w+):\s*("(?:[^"\\]|\\.)*"|![0-9]+|[^,]+)')
_LLVM_DBG = re.compile(r"!dbg (![0-9]+)")


def llvm_source_map(text: str, source_file: str) -> SourceMap:
    """Source map of LLVM IR with debug info (`!dbg` on instructions and on `define`)."""
    meta: dict[str, tuple[str, dict[str, str]]] = {}
    for line in text.splitlines():
        m = _LLVM_META.match(line)
        if m:
            meta[m.group(1)] = (m.group(2), {k: v.strip() for k, v in _LLVM_FIELD.findall(m.group(3))})

    def file_of(ref: str, depth: int = 0) -> str | None:
        kind, fields = meta.get(ref, ("", {}))
        if kind == "DIFile":
            name = fields.get("filename", '""').strip('"')
            directory = fields.get("directory", '""').strip('"')
            return name if name.startswith("/") or not directory else os.path.join(directory, name)
        if depth > 50:
            return None
        nxt = fields.get("file") or fields.get("scope")
        return file_of(nxt, depth + 1) if nxt else None

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


def _ptx_files(lines: list[str]) -> dict[str, str]:
    """PTX's `.file N "dir", "name"` table: file number -> path."""
    files: dict[str, str] = {}
    for line in lines:
        m = _PTX_FILE.match(line)
        if m:
            files[m.group(1)] = os.path.join(m.group(2), m.group(3)) if m.group(3) else m.group(2)
    return files


def ptx_source_map(text: str, source_file: str) -> SourceMap:
    """Source map of PTX from its `.loc` directives.

    LLVM numbers the lines of a multi-line inline-asm string as if they were source lines (each
    asm line gets the previous `.loc` line + 1), so inside `// begin inline asm` ... `// end inline
    asm` the `.loc` that preceded the block is used instead of those counted ones."""
    lines = text.splitlines()
    files = _ptx_files(lines)
    pairs: SourceMap = []
    current: int | None = None
    in_asm = False
    asm_line: int | None = None
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith(".section") or stripped.startswith(".file"):
            current = None
            continue
        if stripped == "// begin inline asm":
            in_asm, asm_line = True, current
            continue
        if stripped == "// end inline asm":
            in_asm, current = False, asm_line
            continue
        m = _PTX_LOC.match(line)
        if m:
            if in_asm:
                continue  # a counted inline-asm line, not a source location
            f = files.get(m.group(1))
            current = int(m.group(2)) if f is not None and _same_file(f, source_file) and int(m.group(2)) else None
            if current:
                pairs.append([number, current])
            continue
        if stripped.startswith("}"):
            current = None
            continue
        line_no = asm_line if in_asm else current
        if line_no and stripped and not stripped.startswith("//"):
            pairs.append([number, line_no])
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


def source_lines(source_map: SourceMap) -> set[int]:
    """The user lines a source map reaches."""
    return {src for _, src in source_map}
