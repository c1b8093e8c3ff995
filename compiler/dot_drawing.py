"""DOT stages -> SVG, drawn by Graphviz's `dot` inside the job's sandbox, once, as a stage of its own.

The DOT a compiler wrote is job-controlled text; laying it out can take long, so it is done here,
under the job's limits, and never by the web process. Each drawing is stored next to its DOT as a
stage of format "svg" (`<key>/svg`); the viewer sanitises it again before it reaches a page.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess

from compiler.pipelines.base import Bundle

MAX_NODES = 1500
LAYOUT_TIMEOUT_S = 20

_NODE_RE = re.compile(r"^\s*\"?[\w.%-]+\"?\s*\[", re.M)


def node_count(dot: str) -> int:
    """Node statements (`name [attrs]`), edges excluded."""
    return sum(1 for line in _NODE_RE.findall(dot) if "->" not in line and "--" not in line)


def strip_external(dot: str) -> str:
    """The DOT without graph attributes that make a browser fetch something (XLA's DOT imports a
    web font through `stylesheet=`)."""
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


def draw(dot: str) -> tuple[str | None, str]:
    """(SVG, "") or (None, why it was not drawn)."""
    nodes = node_count(dot)
    if nodes > MAX_NODES:
        return None, f"the graph has {nodes} nodes, more than the {MAX_NODES} drawn"
    exe = shutil.which("dot")
    if exe is None:
        return None, "Graphviz (dot) is not installed"
    try:
        proc = subprocess.run([exe, "-Tsvg"], input=strip_external(dot), capture_output=True, text=True,
                              timeout=LAYOUT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"Graphviz took more than {LAYOUT_TIMEOUT_S} s"
    if proc.returncode != 0 or "<svg" not in proc.stdout:
        return None, "Graphviz could not draw it: " + proc.stderr.strip()[:300]
    return proc.stdout[proc.stdout.find("<svg"):], ""


def add_drawings(bundle: Bundle) -> None:
    """For every DOT stage in `bundle`, a drawing stage after it (where Graphviz can draw it)."""
    for stage in list(bundle.manifest.stages):
        if stage.format != "dot" or bundle.has(stage.key + "/svg"):
            continue
        try:
            with open(os.path.join(bundle.directory, stage.file), encoding="utf-8", errors="replace") as f:
                svg, _why = draw(f.read())
        except OSError:  # the user's code removed it: nothing to draw
            continue
        if svg is not None:
            bundle.add(stage.key + "/svg", stage.title + " (drawn)", stage.group, "svg", svg,
                       meta={"drawn_from": stage.key})
