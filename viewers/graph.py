"""Graphs: DOT text (format "dot") is shown as text; a drawing (format "svg", made by Graphviz in
the job's sandbox, see compiler/dot_drawing.py) is shown as inline SVG after sanitising.

The web process never runs Graphviz. An SVG a stage holds is job-controlled markup, so it is
parsed with a real XML parser (defusedxml: no entities, no external references) and written out
again from an allowlist: SVG's drawing elements and presentation attributes only. Links (`<a>`,
`href`, `xlink:href`, Graphviz's `URL`), scripts, `<foreignObject>`, event handlers, `style` and
any `url()` but a local `url(#id)` are dropped; every name and value is escaped on the way out.
"""
from __future__ import annotations

import re
from typing import Any
from xml.etree.ElementTree import Element

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError, fromstring
from markupsafe import Markup, escape

from viewers import code

MAX_SVG_BYTES = 32 << 20

# Elements Graphviz (and our own charts) draw with. `a` is unwrapped: its children stay, the link goes.
_ELEMENTS = frozenset({"svg", "g", "title", "desc", "path", "polygon", "polyline", "ellipse", "circle", "rect", "line",
                       "text", "tspan", "defs", "linearGradient", "radialGradient", "stop"})
_UNWRAP = frozenset({"a"})
_ATTRIBUTES = frozenset({
    "id", "class", "transform", "x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r", "rx", "ry", "width", "height",
    "viewBox", "points", "d", "fill", "fill-opacity", "stroke", "stroke-width", "stroke-opacity",
    "stroke-dasharray", "stroke-linecap", "stroke-linejoin", "opacity", "font-family", "font-size",
    "font-weight", "font-style", "text-anchor", "dominant-baseline", "baseline-shift", "text-decoration",
    "preserveAspectRatio", "offset", "stop-color", "stop-opacity", "gradientUnits", "gradientTransform",
    "role",
})
_LOCAL_URL = re.compile(r"^url\(#[\w.-]+\)$")


def _local(name: str) -> str:
    return name.rsplit("}", 1)[-1]


def _value_ok(value: str) -> bool:
    lowered = re.sub(r"[\s\x00-\x1f]", "", value).lower()
    if "url(" in lowered:
        return bool(_LOCAL_URL.match(value.strip()))
    return "javascript:" not in lowered and "expression(" not in lowered


def _write(element: Element, out: list[str]) -> None:
    tag = _local(element.tag) if isinstance(element.tag, str) else ""
    if tag in _ELEMENTS:
        attrs = "".join(Markup(' {}="{}"').format(Markup(name), value)
                        for name, value in ((_local(k), v) for k, v in element.attrib.items())
                        if name in _ATTRIBUTES and not name.lower().startswith("on") and _value_ok(value))
        if tag == "svg":
            attrs += ' xmlns="http://www.w3.org/2000/svg"'
        out.append(f"<{tag}{attrs}>")
        out.append(str(escape(element.text or "")))
        for child in element:
            _write(child, out)
        out.append(f"</{tag}>")
    elif tag in _UNWRAP:
        out.append(str(escape(element.text or "")))
        for child in element:
            _write(child, out)
    # anything else (script, foreignObject, style, image, use, animate, ...) goes with its children
    out.append(str(escape(element.tail or "")))


def sanitise_svg(svg: str) -> str:
    """The SVG rebuilt from the allowlist; raises ValueError when it is not well-formed SVG."""
    if len(svg.encode("utf-8")) > MAX_SVG_BYTES:
        raise ValueError(f"the drawing has more than {MAX_SVG_BYTES:,} bytes")
    try:
        root = fromstring(svg, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except (ParseError, DefusedXmlException) as e:
        raise ValueError(f"the drawing is not well-formed XML: {e}") from None
    if _local(root.tag) != "svg":
        raise ValueError("the drawing is not an SVG document")
    out: list[str] = []
    root.tail = None
    _write(root, out)
    return "".join(out)


def render_svg(text: str, meta: dict[str, Any]) -> str:
    try:
        svg = sanitise_svg(text)
    except ValueError as e:
        return f'<p class="truncated">{escape(str(e))}; showing its text</p>' + code.render(text, "xml")
    return f'<div class="graph-view">{svg}</div>'


def render(text: str, meta: dict[str, Any]) -> str:
    """A "dot" stage: a drawing if the stage holds one, else the DOT text."""
    if text.lstrip().startswith(("<svg", "<?xml")):
        return render_svg(text, meta)
    return ('<p class="note">The DOT text as the compiler wrote it; where Graphviz could lay it out in the sandbox, '
            'the drawing is the stage after this one.</p>' + code.render(text, "text"))
