"""A schedule (format "timeline", written by the XLA pipeline) -> SVG.

One row per computation, one box per instruction in scheduled order. Box width is one program
step; colour says what kind of work it is (collective, fusion/kernel, data movement, other);
hovering shows the instruction with XLA's cost estimate where the pipeline has one.
"""
from __future__ import annotations

import json
from markupsafe import escape  # escapes anything (not only str); leaves Markup alone
from typing import Any

MAX_BOXES = 4000
_KINDS = (
    ("collective", "#e15759", ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
                               "collective-broadcast", "ragged-all-to-all")),
    ("kernel", "#4e79a7", ("fusion", "custom-call", "dot", "convolution", "reduce", "sort", "scatter", "gather")),
    ("control", "#b07aa1", ("while", "conditional", "call", "async-start", "async-done")),
    ("layout", "#76b7b2", ("copy", "transpose", "bitcast", "reshape", "broadcast", "slice",
                           "dynamic-slice", "dynamic-update-slice", "concatenate", "pad")),
    ("bookkeeping", "#bab0ac", ("parameter", "constant", "tuple", "get-tuple-element", "partition-id",
                                "replica-id", "after-all")),
)


def kind_of(opcode: str) -> tuple[str, str]:
    base = opcode.replace("-start", "").replace("-done", "")
    for name, colour, ops in _KINDS:
        if base in ops or opcode in ops:
            return name, colour
    return "other", "#59a14f"


def render(text: str, meta: dict[str, Any], row_h: int = 26, step_w: int = 14) -> str:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return f'<pre class="code">{escape(text)}</pre>'
    comps = data.get("computations", [])
    label_w = 180
    longest = max((len(c["instructions"]) for c in comps), default=0)
    step_w = max(4, min(step_w, 1600 // max(longest, 1)))
    width = label_w + longest * step_w + 20
    height = row_h * len(comps) + 40
    parts = [f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img"><title>scheduled instruction order</title>']
    drawn = 0
    for r, comp in enumerate(comps):
        y = 10 + r * row_h
        name = comp["computation"] + (" (ENTRY)" if comp.get("entry") else "")
        parts.append(f'<text x="{label_w - 6}" y="{y + row_h / 2:.1f}" text-anchor="end" dominant-baseline="middle" '
                     f'font-size="11">{escape(name[:30])}</text>')
        for i, ins in enumerate(comp["instructions"]):
            if drawn >= MAX_BOXES:
                break
            drawn += 1
            kind, colour = kind_of(ins["opcode"])
            tip = f'{i}: {ins["name"]} ({ins["opcode"]}, {kind})'
            if "flops" in ins:
                tip += f', {ins["flops"]:,.0f} flops, {ins.get("bytes_accessed", 0):,.0f} bytes accessed'
            parts.append(f'<rect x="{label_w + i * step_w}" y="{y + 3}" width="{step_w - 1}" height="{row_h - 6}" '
                         f'fill="{colour}" data-line="{int(ins.get("line", 0))}"><title>{escape(tip)}</title></rect>')
    legend_y = height - 14
    x = label_w
    for name, colour, _ in _KINDS + (("other", "#59a14f", ()),):
        parts.append(f'<rect x="{x}" y="{legend_y - 9}" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{x + 14}" y="{legend_y}" font-size="10">{escape(name)}</text>')
        x += 90
    parts.append("</svg>")
    total = sum(len(c["instructions"]) for c in comps)
    note = f'<p class="truncated">drew {MAX_BOXES} of {total} instructions</p>' if total > MAX_BOXES else ""
    scheduled = "" if data.get("scheduled", True) else '<p class="mesh-note">the module is not scheduled: printed order</p>'
    return f'<div class="timeline-view">{scheduled}{"".join(parts)}{note}</div>'
