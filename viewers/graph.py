"""A drawing (format "svg", laid out by Graphviz in the worker: compiler/graph_drawing.py) -> the
page. The stored SVG is a job's output, so it goes through the format's allowlist sanitizer again
here; what fails it is shown as escaped text."""
from __future__ import annotations

from typing import Any

from compiler import formats
from viewers import code


def render(text: str, meta: dict[str, Any]) -> str:
    try:
        svg = formats.get("svg").decode(text)
    except formats.FormatError as e:
        return f'<p class="truncated">{code.escape(str(e))}; showing the text</p>' + code.render(text, "text")
    return f'<div class="graph-view">{svg}</div>'
