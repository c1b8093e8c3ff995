"""A job's `timings` -> HTML: compile phases as a bar chart (SVG), eager vs compiled with their
spread, accuracy, and every other number the pipeline measured, in a table."""
from __future__ import annotations

from typing import Any

from markupsafe import escape  # escapes anything (not only str); leaves Markup alone

from compiler import formats

_BAR_H, _LABEL_W, _CHART_W = 20, 190, 420


def _bars(rows: list[tuple[str, float]], unit: str) -> str:
    if not rows:
        return ""
    top = max(v for _, v in rows) or 1.0
    height = _BAR_H * len(rows) + 8
    parts = [f'<svg class="bars" width="{_LABEL_W + _CHART_W + 90}" height="{height}" role="img">']
    for i, (label, value) in enumerate(rows):
        y = 4 + i * _BAR_H
        width = max(1.0, _CHART_W * value / top)
        parts.append(f'<text x="{_LABEL_W - 6}" y="{y + 14}" text-anchor="end" font-size="12">{escape(label)}</text>'
                     f'<rect x="{_LABEL_W}" y="{y + 3}" width="{width:.1f}" height="{_BAR_H - 6}" fill="#0969da">'
                     f'<title>{escape(label)}: {value:g} {unit}</title></rect>'
                     f'<text x="{_LABEL_W + width + 6:.1f}" y="{y + 14}" font-size="12">{value:.3g} {unit}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _table(values: dict[str, Any]) -> str:
    rows = "".join(f"<tr><th>{escape(str(k))}</th><td class='num'>{escape(_fmt(v))}</td></tr>"
                   for k, v in values.items() if not isinstance(v, dict))
    return f'<table class="data">{rows}</table>' if rows else ""


def _fmt(value: Any) -> str:
    """A value in words: no Python list, None or True shown raw."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_fmt(v) for v in value) or "none"
    return str(value)


def render(timings: dict[str, Any]) -> str:
    t = formats.Timings.read(timings)
    out = []
    if t.not_measured:
        n = t.not_measured
        setting = f" (setting {n['setting']})" if n.get("setting") else ""
        out.append(f'<p class="notice" role="note"><b>Not measured</b>: {escape(n.get("phase", ""))} — '
                   f'{escape(n.get("why", ""))}{escape(setting)}. Every stage of the compile is here.</p>')
    if t.compile and t.compile.phases_s:
        out.append(f"<h3>Compile time</h3><p class='note'>{escape(t.compile.source)}</p>")
        out.append(_bars(t.compile.phases_s, "s"))
    if t.run:
        out.append(f"<h3>Run time</h3><p class='note'>{escape(t.run.where)}: "
                   f"{escape(t.run.what)}, median per call after warm-up, "
                   f"IQR as spread</p>")
        out.append(_bars(t.run.medians_ms, "ms"))
        out.append(_table(t.run.values))
        if t.run.accuracy:
            out.append("<h4>Accuracy (compiled vs eager)</h4>" + _table(t.run.accuracy))
    for name, value in t.others.items():
        out.append(f"<h3>{escape(name)}</h3>" + _table(value))
    if t.compile and t.compile.events:
        out.append("<h4>PyTorch compile events (seconds, summed)</h4>" + _table(t.compile.events))
    return "".join(out) or "<p class='hint'>no timings recorded</p>"
