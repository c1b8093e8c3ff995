"""Memory over program order (format "memory": compiler.formats.MemoryTimeline, written by the XLA
pipeline) -> SVG.

Each buffer XLA placed in its temp allocation is a rectangle: x from the program point where it
becomes live to where it dies, y from its offset to offset+size - the heap as XLA's buffer
assignment packed it. A line shows the bytes live at each step; the peak is the highest point of
that line (not the top of the packed heap, which is drawn apart), and what is live there is listed
by size.
"""
from __future__ import annotations

from html import escape
from typing import Any

from compiler import formats
from viewers.cells import na

MAX_BLOCKS = 3000
_COLOURS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
            "#9c755f", "#bab0ac")


# a value at the peak that is not another's buffer updated in place (the table's last column)
_OWN = na("its own buffer: not updated in place of another value")


def _fmt(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n}"


def render(text: str, meta: dict[str, Any], width: int = 900, height: int = 320) -> str:
    try:
        data: formats.MemoryTimeline = formats.get("memory").decode(text)
    except formats.FormatError:
        return f'<pre class="code">{escape(text)}</pre>'
    stats = data.xla_memory_stats
    if not data.peak_bytes and not data.blocks and not any(data.live_bytes):
        # nothing to draw: an empty chart and a table of no rows said nothing (the sixth walk)
        return (f'<div class="memory-view"><p class="memory-summary">No temporary buffer: every value of the '
                f'program is one of its arguments or outputs, so XLA\'s temp allocation is empty '
                f'(temp_size_in_bytes = {escape(str(stats.get("temp_size_in_bytes", 0)))}); arguments '
                f'{escape(str(stats.get("argument_size_in_bytes", "?")))}, outputs '
                f'{escape(str(stats.get("output_size_in_bytes", "?")))} bytes.</p></div>')
    steps = max(data.steps, 1)
    peak = data.peak_bytes
    live = data.live_bytes
    heap = data.heap_bytes or max(data.high_water, default=0)
    top = max([peak, heap] + live + [1])
    left, bottom, pad = 70, 30, 16
    pw, ph = width - left - pad, height - bottom - pad
    sx = pw / (steps + 1)

    def y(v: float) -> float:
        return pad + ph - ph * v / top

    parts = [f'<svg class="memory-chart" xmlns="http://www.w3.org/2000/svg" width="100%" '
             f'viewBox="0 0 {width} {height}" role="img"><title>temp buffers over program order</title>',
             f'<line class="axis" x1="{left}" y1="{pad + ph}" x2="{left + pw}" y2="{pad + ph}" stroke="#333"/>',
             f'<line class="axis" x1="{left}" y1="{pad}" x2="{left}" y2="{pad + ph}" stroke="#333"/>']
    for frac in (0, 0.5, 1):
        v = top * frac
        parts.append(f'<text x="{left - 4}" y="{y(v):.1f}" text-anchor="end" font-size="10">{escape(_fmt(v))}</text>')
    blocks = data.blocks
    for k, b in enumerate(blocks[:MAX_BLOCKS]):
        x0 = left + b.start * sx
        x1 = left + (b.end + 1) * sx
        y1, y0 = y(b.offset), y(b.offset + b.size)
        tip = f'{b.name} {b.shape}: {_fmt(b.size)} at offset {b.offset}, live {b.start}-{b.end}'
        parts.append(f'<rect class="block" x="{x0:.1f}" y="{y0:.1f}" width="{max(x1 - x0, 1):.1f}" '
                     f'height="{max(y1 - y0, 0.5):.1f}" fill="{_COLOURS[k % len(_COLOURS)]}" fill-opacity="0.75" '
                     f'stroke="#222" stroke-width="0.3"><title>{escape(tip)}</title></rect>')
    if heap:
        parts.append(f'<line class="heap" x1="{left}" y1="{y(heap):.1f}" x2="{left + pw}" y2="{y(heap):.1f}" '
                     f'stroke="#777" stroke-dasharray="6 3"><title>the heap as XLA packed it: '
                     f'{escape(_fmt(heap))}</title></line>'
                     f'<text class="heap-label" x="{left + 4}" y="{max(y(heap) - 3, 10):.1f}" font-size="10" '
                     f'fill="#555">heap '
                     f'{escape(_fmt(heap))}</text>')
    if live:
        pts = " ".join(f"{left + (t + 0.5) * sx:.1f},{y(v):.1f}" for t, v in enumerate(live))
        parts.append(f'<polyline class="live" points="{pts}" fill="none" stroke="#000" stroke-width="1.5">'
                     f'<title>bytes live at each step</title></polyline>')
    at = data.peak_at
    px = left + (at + 0.5) * sx
    parts.append(f'<line class="peak-step" x1="{px:.1f}" y1="{pad}" x2="{px:.1f}" y2="{pad + ph}" stroke="#d00" '
                 f'stroke-dasharray="2 2"/><circle class="peak" cx="{px:.1f}" cy="{y(peak):.1f}" r="4" fill="#d00" '
                 f'data-step="{at}" data-bytes="{peak}"><title>peak {escape(_fmt(peak))} live at step {at}</title>'
                 f'</circle><text class="peak-label" x="{left + pw}" y="{pad - 4}" text-anchor="end" font-size="11" '
                 f'fill="#d00">'
                 f'peak {escape(_fmt(peak))} live at step {at} ({escape(data.peak_instruction)})</text>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{height - 6}" text-anchor="middle" font-size="11">program order '
                 f'(0-{steps})</text></svg>')
    temp = stats.get("temp_size_in_bytes")
    rows = "".join(
        f'<tr><td><code>{escape(v.name)}</code></td><td>{escape(v.shape)}</td><td data-bytes="{v.size}">'
        f'{escape(_fmt(v.size))}</td><td>{v.offset}</td><td>{escape("-".join(map(str, v.live)))}</td>'
        f'<td>{("updated in place of <code>" + escape(v.in_place_of) + "</code>") if v.in_place_of else _OWN}</td></tr>'
        for v in data.live_at_peak)
    unused = heap - peak
    packing = (f"XLA packed the heap into {heap} bytes: {unused} bytes ({escape(_fmt(unused))}) of it hold no live "
               "value at the peak (fragmentation)" if unused > 0 else
               "the heap XLA packed is exactly the peak: nothing is wasted")
    agree = ("equal to" if heap == temp else "different from") if isinstance(temp, int) else "compared with"
    summary = (f'<p class="memory-summary">peak: <b>{escape(_fmt(peak))}</b> (<span class="peak-bytes">{peak}</span> '
               f'bytes) live at step <b class="peak-step">{at}</b> (<code>{escape(data.peak_instruction)}</code>), '
               f'the most bytes of the temp allocation holding live values at once; {packing}. The heap\'s '
               f'{heap} bytes are {agree} XLA\'s temp_size_in_bytes = '
               f'{escape(str(temp if temp is not None else "?"))}; '
               f'arguments {escape(str(stats.get("argument_size_in_bytes", "?")))}, outputs '
               f'{escape(str(stats.get("output_size_in_bytes", "?")))} bytes.</p>')
    if data.xla_peak_step is not None and data.xla_peak_step != at:
        summary += (f'<p class="note">XLA\'s own live-range report puts its peak at step {data.xla_peak_step}: it '
                    'counts every buffer (parameters and outputs too), this chart the temp allocation only.</p>')
    if data.unranged_values:
        summary += (f'<p class="note">XLA listed no live range for {len(data.unranged_values)} temp value(s) '
                    f'({escape(", ".join(data.unranged_values[:8]))}); they are drawn over the whole program.</p>')
    table = (f'<table class="memory-peak"><caption>live at step {at}, by size</caption><thead><tr><th>value</th>'
             f'<th>shape</th><th>size</th><th>offset</th><th>live</th><th>in place</th></tr></thead>'
             f'<tbody>{rows}</tbody></table>') if rows else ""
    note = (f'<p class="truncated">drawing the first {MAX_BLOCKS} of {len(blocks)} buffers</p>'
            if len(blocks) > MAX_BLOCKS else "")
    return f'<div class="memory-view">{summary}{"".join(parts)}{note}{table}</div>'
