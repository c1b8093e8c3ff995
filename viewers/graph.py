"""A drawing (format "svg", laid out by Graphviz in the worker: compiler/graph_drawing.py) -> the
page. The stored SVG is a job's output: the runner sanitized it once when it stored it (the
format's allowlist sanitizer) and says so in `meta["runner"]`, a key no job may write; a drawing
without that mark (one stored before) is sanitized here; what fails is shown as escaped text."""
from __future__ import annotations

from typing import Any

from compiler import formats
from viewers import code


def render(text: str, meta: dict[str, Any]) -> str:
    verdict = (meta.get("runner") or {}).get("svg") if isinstance(meta.get("runner"), dict) else None
    if verdict == "sanitized":
        return f'<div class="graph-view">{text}</div>'
    if verdict:
        return f'<p class="truncated">{code.escape(verdict)}; showing the text</p>' + code.render(text, "text")
    try:
        svg = formats.get("svg").decode(text)
    except formats.FormatError as e:
        return f'<p class="truncated">{code.escape(str(e))}; showing the text</p>' + code.render(text, "text")
    return f'<div class="graph-view">{svg}</div>'
