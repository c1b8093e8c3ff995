"""Text tools shared by the IR parsers: bracket scanning (HLO and MLIR print nested brackets and
quoted strings) and MLIR locations (`loc(...)` attributes and `#locN = loc(...)` aliases).

MLIR prints a location as a file position `"path":line:col`, a name `"name"(child)`, a call site
`callsite(callee at caller)` or a fusion `fused<meta>[a, b]`, any of them possibly through an alias
`#locN`. Triton's TTIR/TTGIR and pass dumps, XLA's StableHLO and JAX's lowering all print them the
same way, so one reader serves them all. Pure functions over text.
"""
from __future__ import annotations

import functools
import os
import re
from typing import Iterator

SourceMap = list[list[int]]

_PAIRS = {"(": ")", "{": "}", "[": "]"}


def _unquoted(text: str, start: int = 0) -> Iterator[tuple[int, str]]:
    """(index, character) of the characters of `text` from `start` that are outside quoted strings."""
    in_str, i = False, start
    while i < len(text):
        ch = text[i]
        if in_str:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        else:
            yield i, ch
        i += 1


def balanced_end(text: str, start: int) -> int:
    """Index just past the bracket group opening at text[start] (quotes respected); len(text)
    when the group is not closed."""
    stack: list[str] = []
    for i, ch in _unquoted(text, start):
        if ch in _PAIRS:
            stack.append(_PAIRS[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                return i + 1
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


# A frame of a location chain: (file, line, column or None). A chain lists the frames of one
# location innermost first: an op inlined from a helper is [helper line, ..., the call site].
Frame = tuple[str, int, "int | None"]
Chain = tuple[Frame, ...]

_FILE_POS = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+)(?::(\d+))?(?:\s+to\s+(?::?\d+)(?::\d+)?)?')
_ALIAS_REF = re.compile(r"#loc\d*")
_NAME = re.compile(r'"((?:[^"\\]|\\.)*)"')
_MAX_CHAINS = 64  # fused locations of fused locations: enough alternatives for any op


def location_chains(body: str, aliases: dict[str, str], seen: frozenset[str] = frozenset()) -> list[Chain]:
    """The chains of one location body (what is inside `loc(...)`), aliases expanded:

    - `"file":line:col` (a range's tail ignored) -> one chain of one frame;
    - `callsite(callee at caller)` -> the callee's frames, then the caller's;
    - `fused<meta>[a, b]` -> the chains of a and of b (alternatives);
    - `"name"(child)` -> the child's chains (a name alone names no place: no chain);
    - `unknown` -> no frame (so `callsite(unknown at x)` is x's chain).
    """
    body = body.strip()
    if not body or body == "unknown":
        return [()]
    alias = _ALIAS_REF.fullmatch(body)
    if alias:
        if body in aliases and body not in seen:
            return location_chains(aliases[body], aliases, seen | {body})
        return []
    if body.startswith("callsite(") and body.endswith(")"):
        inner = body[len("callsite("):-1]
        cut = _top_level_at(inner)
        if cut < 0:
            return []
        callees = location_chains(inner[:cut], aliases, seen)
        callers = location_chains(inner[cut + 4:], aliases, seen)
        return [a + b for a in callees for b in callers][:_MAX_CHAINS]
    if body.startswith("fused"):
        open_at = body.find("[", _angle_end(body, 5) if body[5:6] == "<" else 5)
        if open_at < 0:
            return []
        out: list[Chain] = []
        for part in split_top_level(body[open_at + 1:balanced_end(body, open_at) - 1]):
            out.extend(c for c in location_chains(part, aliases, seen) if c)
        return out[:_MAX_CHAINS]
    m = _FILE_POS.match(body)
    if m and m.end() == len(body):
        col = int(m.group(3)) if m.group(3) else None
        return [((m.group(1), int(m.group(2)), col or None),)]
    m = _NAME.match(body)
    if m:
        rest = body[m.end():].strip()
        if rest.startswith("(") and rest.endswith(")"):
            return [c for c in location_chains(rest[1:-1], aliases, seen) if c]
        return []
    return []


def _angle_end(text: str, start: int) -> int:
    """Index just past the `<...>` group opening at text[start] (quotes respected)."""
    depth = 0
    for i, ch in _unquoted(text, start):
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == ">" and depth == 0:
            return i + 1
    return len(text)


def _top_level_at(text: str) -> int:
    """Index of the ` at ` that separates a call site's callee from its caller (outside brackets
    and quotes), or -1."""
    depth = 0
    for i, ch in _unquoted(text):
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        elif depth == 0 and text.startswith(" at ", i):
            return i
    return -1


def line_location_chains(text: str) -> dict[int, list[Chain]]:
    """Artifact line -> the chains of the op printed on it, for every line of an MLIR module
    whose op has a location with a place in it: the op's own location is the last on its line
    (block arguments carry earlier ones; a line with only those, `^bb0(...)`, gets theirs)."""
    aliases = loc_aliases(text)
    out: dict[int, list[Chain]] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        if is_alias_line(line):
            continue
        for _, _, body in reversed(locations_on_line(line)):
            chains = [c for c in location_chains(body, aliases) if c]
            if chains:
                out[number] = list(dict.fromkeys(chains))
                break
    return out


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
    lines = (_strip_line(line) for line in ir.splitlines())
    return "\n".join(line for line in lines if line is not None) + "\n"


@functools.lru_cache(maxsize=1 << 14)
def _strip_line(line: str) -> str | None:
    """One line of `strip_locations` (None: an alias line, dropped). Cached: a pass dump repeats
    nearly every line of the one before it, and the bracket scan is the cost of a pass log."""
    if is_alias_line(line):
        return None
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
    return "".join(kept).rstrip()
