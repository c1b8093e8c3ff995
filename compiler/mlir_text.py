"""Text tools shared by the IR parsers: bracket scanning (HLO and MLIR print nested brackets and
quoted strings) and MLIR locations (`loc(...)` attributes and `#locN = loc(...)` aliases).

MLIR prints a location as a file position `"path":line:col`, a name `"name"(child)`, a call site
`callsite(callee at caller)` or a fusion `fused<meta>[a, b]`, any of them possibly through an alias
`#locN`. Triton's TTIR/TTGIR and pass dumps, XLA's StableHLO and JAX's lowering all print them the
same way, so one reader serves them all. Pure functions over text.
"""
from __future__ import annotations

import os
import re

SourceMap = list[list[int]]

_PAIRS = {"(": ")", "{": "}", "[": "]"}


def balanced_end(text: str, start: int) -> int:
    """Index just past the bracket group opening at text[start] (quotes respected); len(text)
    when the group is not closed."""
    stack: list[str] = []
    i, in_str = start, False
    while i < len(text):
        ch = text[i]
        if in_str:
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in _PAIRS:
            stack.append(_PAIRS[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                return i + 1
        i += 1
    return len(text)


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on `sep` outside brackets and quotes; parts are stripped, a trailing empty part dropped."""
    parts, depth, cur, in_str, i = [], 0, [], False, 0
    while i < len(text):
        ch = text[i]
        if in_str:
            cur.append(ch)
            if ch == "\\" and i + 1 < len(text):
                cur.append(text[i + 1])
                i += 1
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
            cur.append(ch)
        elif ch in "([{":
            depth += 1
            cur.append(ch)
        elif ch in ")]}":
            depth -= 1
            cur.append(ch)
        elif ch == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


# ---------------------------------------------------------------------------------------------
# MLIR locations
# ---------------------------------------------------------------------------------------------

LOC_ALIAS = re.compile(r"^\s*(#loc\d*)\s*=\s*loc\((.*)\)\s*$")
# A file position (column optional, a range's tail ignored) or an alias reference, in text order.
_FRAME_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+)(?::\d+)?|(#loc\d*)\b')


def is_alias_line(line: str) -> bool:
    """True for a `#locN = loc(...)` definition line."""
    return LOC_ALIAS.match(line) is not None


def loc_aliases(text: str) -> dict[str, str]:
    """`#locN` -> the body of its `loc(...)` definition."""
    out = {}
    for line in text.split("\n"):
        m = LOC_ALIAS.match(line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def locations_on_line(line: str) -> list[tuple[int, int, str]]:
    """(start, end, body) of every outermost `loc(...)` on a line, in order; `start` is the index
    of `loc`, `end` just past its closing parenthesis."""
    out, i = [], 0
    while True:
        start = line.find("loc(", i)
        if start < 0:
            return out
        if start > 0 and (line[start - 1].isalnum() or line[start - 1] in "_#"):
            i = start + 4
            continue
        end = balanced_end(line, start + 3)
        out.append((start, end, line[start + 4:end - 1]))
        i = end


def location_frames(body: str, aliases: dict[str, str], seen: frozenset[str] = frozenset()) -> list[tuple[str, int]]:
    """(file, line) frames of a location body, aliases expanded, callee before caller (the order
    MLIR prints call sites and fused locations in)."""
    frames: list[tuple[str, int]] = []
    for m in _FRAME_TOKEN.finditer(body):
        if m.group(3):
            alias = m.group(3)
            if alias in aliases and alias not in seen:
                frames.extend(location_frames(aliases[alias], aliases, seen | {alias}))
        else:
            frames.append((m.group(1), int(m.group(2))))
    return frames


def same_file(recorded: str, source_file: str) -> bool:
    return recorded == source_file or os.path.normpath(recorded) == os.path.normpath(source_file)


def source_map(text: str, source_file: str) -> SourceMap:
    """[artifact line, source line] for each operation line of an MLIR module whose location
    reaches `source_file`. The op's own location is the last one on its line (block arguments
    carry earlier ones), so locations are tried from the last; within a location the first frame
    in the file wins (an inlined helper the user wrote maps to the helper's line)."""
    aliases = loc_aliases(text)
    pairs: SourceMap = []
    for number, line in enumerate(text.split("\n"), start=1):
        if is_alias_line(line):
            continue
        for _, _, body in reversed(locations_on_line(line)):
            hit = next((ln for f, ln in location_frames(body, aliases) if same_file(f, source_file)), None)
            if hit is not None:
                pairs.append([number, hit])
                break
    return pairs


def location_names(text: str) -> dict[str, str]:
    """`#locN` -> the name of a name location (`#loc3 = loc("dot")` or `loc("dot"(...))`)."""
    out = {}
    for alias, body in loc_aliases(text).items():
        m = re.match(r'^"((?:\\.|[^"\\])*)"(?!:)', body.strip())
        if m:
            out[alias] = m.group(1)
    return out


def strip_locations(ir: str) -> str:
    """The IR without `#locN = loc(...)` lines and without the ` loc(...)` attributes on its lines
    (they renumber on every print, so diffs compare the operations only)."""
    lines = []
    for line in ir.splitlines():
        if is_alias_line(line):
            continue
        kept, last = [], 0
        for start, end, _ in locations_on_line(line):
            cut = start
            while cut > last and line[cut - 1] in " \t":
                cut -= 1
            if cut == start:  # a location not preceded by whitespace is part of something else
                continue
            kept.append(line[last:cut])
            last = end
        kept.append(line[last:])
        lines.append("".join(kept).rstrip())
    return "\n".join(lines) + "\n"
