"""A torch.profiler capture (format "profile": compiler.formats.Profile) -> a table of ops and
kernels by self time and a timeline SVG, one row per op name, one box per call."""
from __future__ import annotations

from html import escape
from typing import Any

from compiler import formats

MAX_ROWS = 24
_PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7")


def render(text: str, meta: dict[str, Any]) -> str:
    try:
        data: formats.Profile = formats.get("profile").decode(text)
    except formats.FormatError:
        return f'<pre class="code">{escape(text)}</pre>'
    rows = data.table
    device = any(r.self_device_us for r in rows)
    head = ("<tr><th>op or kernel</th><th>calls</th><th>self CPU µs</th><th>total CPU µs</th>"
            + ("<th>self GPU µs</th>" if device else "") + "</tr>")
    body = "".join(f"<tr><td>{_name(r.name, data.labels)}</td><td class='num'>{r.calls}</td>"
                   f"<td class='num'>{r.self_us:.1f}</td><td class='num'>{r.total_us:.1f}</td>"
                   + (f"<td class='num'>{r.self_device_us:.1f}</td>" if device else "") + "</tr>"
                   for r in rows)
    note = (f"<p class='note'>{escape(data.where)}; one call, under torch.profiler. Its times are of that one "
            "call with the profiler's own overhead in them: they are not the timing, which is the median per "
            "call on the Timings tab, taken without the profiler.</p>")
    return note + _timeline(data.events, data.labels) + f'<table class="data profile-table">{head}{body}</table>'


def _name(name: str, labels: dict[str, str]) -> str:
    """A row's op or kernel: the profiler's name, or (a compiled graph's call, which the profiler
    names by a hash) its name in words, with the profiler's own on hover."""
    words = labels.get(name)
    if not words:
        return f"<code>{escape(name)}</code>"
    return f'<span class="profile-label" title="as the profiler names it: {escape(name)}">{escape(words)}</span>'


def _timeline(events: list[formats.ProfileEvent], labels: dict[str, str]) -> str:
    if not events:
        return ""
    names: list[str] = []
    for e in sorted(events, key=lambda e: -e.dur_us):
        if e.name not in names:
            names.append(e.name)
    names = names[:MAX_ROWS]
    end = max(e.start_us + e.dur_us for e in events) or 1.0
    # about as wide as the pane at 1500 px (the stylesheet scales it down in a narrower one); a label
    # cut short says itself whole on hover
    label_w, chart_w, row_h = 250, 560, 18
    width, height = label_w + chart_w + 20, row_h * len(names) + 30
    parts = [f'<svg class="profile-timeline" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             f'role="img"><title>one compiled call over {end:.0f} µs</title>']
    for i, name in enumerate(names):
        y = 4 + i * row_h
        whole = labels.get(name, name)
        shown = whole if len(whole) <= 40 else whole[:39] + "…"
        parts.append(f'<g><title>{escape(whole)}</title><text x="{label_w - 6}" y="{y + 12}" text-anchor="end" '
                     f'font-size="11">{escape(shown)}</text></g>')
    for e in events:
        if e.name not in names:
            continue
        i = names.index(e.name)
        x = label_w + chart_w * e.start_us / end
        w = max(1.0, chart_w * e.dur_us / end)
        parts.append(f'<rect x="{x:.1f}" y="{4 + i * row_h + 2}" width="{w:.1f}" height="{row_h - 4}" '
                     f'fill="{_PALETTE[i % len(_PALETTE)]}"><title>{escape(labels.get(e.name, e.name))}: '
                     f'{e.dur_us:.1f} µs at {e.start_us:.1f} µs</title></rect>')
    parts.append(f'<text x="{label_w}" y="{height - 6}" font-size="11">0 µs</text>'
                 f'<text x="{label_w + chart_w}" y="{height - 6}" font-size="11" text-anchor="end">{end:.0f} µs</text>')
    return "".join(parts) + "</svg>"
