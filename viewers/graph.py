"""DOT text (format "dot") -> SVG through Graphviz's `dot`, with a cap on graph size.

Graphs above the node cap, or that Graphviz cannot lay out in time, fall back to the DOT text
as code. Display only: the stage keeps the DOT exactly as the compiler wrote it; the viewer drops
graph attributes that would make the browser fetch something (XLA's DOT imports a web font
through `stylesheet=`) and any javascript: links.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from html import escape
from typing import Any

from viewers import code

MAX_NODES = 1500
LAYOUT_TIMEOUT_S = 20

_NODE_RE = re.compile(r"^\s*\"?[\w.%-]+\"?\s*\[", re.M)


def node_count(dot: str) -> int:
    """Node statements (`name [attrs]`), edges excluded."""
    return sum(1 for line in _NODE_RE.findall(dot) if "->" not in line and "--" not in line)


def _strip_external(dot: str) -> str:
    # stylesheet=< ... > spans lines in XLA's output; an HTML-like value ends at the matching '>'.
    out, i = [], 0
    for m in re.finditer(r"stylesheet\s*=\s*<", dot):
        if m.start() < i:
            continue
        depth, j = 1, m.end()
        while j < len(dot) and depth:
            depth += {"<": 1, ">": -1}.get(dot[j], 0)
            j += 1
        out.append(dot[i:m.start()])
        i = j
        while i < len(dot) and dot[i] in " ;\n":
            i += 1
    out.append(dot[i:])
    return re.sub(r'stylesheet\s*=\s*"[^"]*"\s*;?', "", "".join(out))


def _fallback(text: str, why: str) -> str:
    return f'<p class="truncated">{escape(why)}; showing the DOT text</p>' + code.render(text, "text")


def render(text: str, meta: dict[str, Any]) -> str:
    nodes = node_count(text)
    if nodes > MAX_NODES:
        return _fallback(text, f"the graph has {nodes} nodes, more than the {MAX_NODES} drawn")
    dot = shutil.which("dot")
    if dot is None:
        return _fallback(text, "Graphviz (dot) is not installed")
    try:
        proc = subprocess.run([dot, "-Tsvg"], input=_strip_external(text), capture_output=True, text=True,
                              timeout=LAYOUT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return _fallback(text, f"Graphviz took more than {LAYOUT_TIMEOUT_S} s")
    if proc.returncode != 0 or "<svg" not in proc.stdout:
        return _fallback(text, "Graphviz could not draw it: " + proc.stderr.strip()[:300])
    svg = proc.stdout
    start = svg.find("<svg")
    svg = svg[start:] if start >= 0 else svg
    svg = re.sub(r'(xlink:href|href)="\s*javascript:[^"]*"', "", svg, flags=re.I)
    svg = re.sub(r"<\?xml-stylesheet[^>]*>", "", svg)
    return f'<div class="graph-view">{svg}</div>'
