"""Memory over program order (format "memory", written by the XLA pipeline) -> SVG.

Each buffer XLA placed in its temp allocation is a rectangle: x from the program point where it
becomes live to where it dies, y from its offset to offset+size - the heap as XLA's buffer
assignment packed it. A line shows the bytes live at each point; the peak is marked and what is
live at it is listed.
"""
from __future__ import annotations

import json
from markupsafe import escape  # escapes anything (not only str); leaves Markup alone
from typing import Any

MAX_BLOCKS = 3000
_COLOURS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
            "#9c755f", "#bab0ac")


def _fmt(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n}"


def render(text: str, meta: dict[str, Any], width: int = 900, height: int = 320) -> str:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return f'<pre class="code">{escape(text)}</pre>'
    steps = max(int(data.get("steps", 0)), 1)
    peak = int(data.get("peak_bytes", 0))
    live = data.get("live_bytes", [])
    top = max([peak] + live + [1])
    left, bottom, pad = 70, 30, 10
    pw, ph = width - left - pad, height - bottom - pad
    sx = pw / (steps + 1)

    def y(v: float) -> float:
        return pad + ph - ph * v / top

    parts = [f'<svg class="memory-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img"><title>temp buffers over program order</title>',
             f'<line x1="{left}" y1="{pad + ph}" x2="{left + pw}" y2="{pad + ph}" stroke="#333"/>',
             f'<line x1="{left}" y1="{pad}" x2="{left}" y2="{pad + ph}" stroke="#333"/>']
    for frac in (0, 0.5, 1):
        v = top * frac
        parts.append(f'<text x="{left - 4}" y="{y(v):.1f}" text-anchor="end" font-size="10">{escape(_fmt(v))}</text>')
    blocks = data.get("blocks", [])
    for k, b in enumerate(blocks[:MAX_BLOCKS]):
        x0 = left + b["start"] * sx
        x1 = left + (b["end"] + 1) * sx
        y1, y0 = y(b["offset"]), y(b["offset"] + b["size"])
        tip = f'{b["name"]} {b.get("shape", "")}: {_fmt(b["size"])} at offset {b["offset"]}, live {b["start"]}-{b["end"]}'
        parts.append(f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{max(x1 - x0, 1):.1f}" height="{max(y1 - y0, 0.5):.1f}" '
                     f'fill="{_COLOURS[k % len(_COLOURS)]}" fill-opacity="0.75" stroke="#222" stroke-width="0.3">'
                     f'<title>{escape(tip)}</title></rect>')
    if live:
        pts = " ".join(f"{left + (t + 0.5) * sx:.1f},{y(v):.1f}" for t, v in enumerate(live))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="#000" stroke-width="1.5" stroke-dasharray="4 2">'
                     f'<title>bytes live</title></polyline>')
    at = int(data.get("peak_at", 0))
    px = left + (at + 0.5) * sx
    parts.append(f'<line x1="{left}" y1="{y(peak):.1f}" x2="{left + pw}" y2="{y(peak):.1f}" stroke="#d00" '
                 f'stroke-dasharray="2 2"/><circle cx="{px:.1f}" cy="{y(peak):.1f}" r="4" fill="#d00">'
                 f'<title>peak {escape(_fmt(peak))} at {at}</title></circle>'
                 f'<text x="{left + pw}" y="{max(y(peak) - 4, 10):.1f}" text-anchor="end" font-size="11" fill="#d00">'
                 f'peak {escape(_fmt(peak))} at step {at} ({escape(str(data.get("peak_instruction", "")))})</text>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{height - 6}" text-anchor="middle" font-size="11">program order '
                 f'(0-{steps})</text></svg>')
    stats = data.get("xla_memory_stats", {})
    rows = "".join(f"<tr><td><code>{escape(v['name'])}</code></td><td>{escape(_fmt(v['size']))}</td>"
                   f"<td>{int(v['offset'])}</td></tr>" for v in data.get("live_at_peak", []))
    summary = (f'<p class="memory-summary">peak of the temp buffer: <b>{escape(_fmt(peak))}</b> ({peak} bytes); '
               f'XLA reports temp_size_in_bytes = {escape(str(stats.get("temp_size_in_bytes", "?")))}, '
               f'arguments {escape(str(stats.get("argument_size_in_bytes", "?")))}, outputs '
               f'{escape(str(stats.get("output_size_in_bytes", "?")))} bytes.</p>')
    table = (f'<table class="memory-peak"><thead><tr><th>live at the peak</th><th>size</th><th>offset</th></tr>'
             f'</thead><tbody>{rows}</tbody></table>')
    note = f'<p class="truncated">drawing the first {MAX_BLOCKS} of {len(blocks)} buffers</p>' if len(blocks) > MAX_BLOCKS else ""
    return f'<div class="memory-view">{summary}{"".join(parts)}{note}{table}</div>'
