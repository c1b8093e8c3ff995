"""SVG drawings made in the worker, kept only after an allowlist sanitizer dropped everything that
could fetch, link or run something."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring as defused_fromstring

from compiler.formats.errors import FormatError

# --- svg: drawings made in the worker -----------------------------------------------------------

_SVG_NS = "http://www.w3.org/2000/svg"
# What a Graphviz drawing uses; anything else (script, foreignObject, image, use, style, a, ...) goes.
_SVG_ELEMENTS = {"svg", "g", "title", "desc", "path", "polygon", "polyline", "ellipse", "circle", "rect", "line",
                 "text", "tspan", "defs", "linearGradient", "radialGradient", "stop"}
_UNWRAPPED = {"a"}  # links: dropped, their contents kept
_LOCAL_URL = re.compile(r"^\s*url\(\s*#[\w.\-]+\s*\)\s*$")
ET.register_namespace("", _SVG_NS)  # serialise as plain <svg>, not <ns0:svg>


def _local(name: str) -> str:
    return name.rsplit("}", 1)[-1]


def _safe_attribute(name: str, value: str) -> bool:
    local = _local(name).lower()
    if name.startswith("{") and not name.startswith("{" + _SVG_NS):
        return False  # xlink:href, xml:base and every other namespaced attribute
    if local.startswith("on") or local in ("href", "url", "target", "style", "src", "xmlns"):
        return False
    lowered = value.lower()
    if "url(" in lowered and not _LOCAL_URL.match(value):
        return False  # fill="url(#gradient)" stays; anything that names another resource goes
    return "javascript:" not in lowered and "data:" not in lowered


def _clean(element: ET.Element) -> list[ET.Element]:
    """The element made safe (a list: an unwrapped link gives its children), or [] to drop it."""
    tag = _local(element.tag) if isinstance(element.tag, str) else ""
    if not element.tag or not isinstance(element.tag, str):
        return []
    if element.tag.startswith("{") and not element.tag.startswith("{" + _SVG_NS):
        return []
    children = [c for child in list(element) for c in _clean(child)]
    if tag in _UNWRAPPED:
        return children
    if tag not in _SVG_ELEMENTS:
        return []
    for name in list(element.attrib):
        if not _safe_attribute(name, element.attrib[name]):
            del element.attrib[name]
    for child in list(element):
        element.remove(child)
    element.extend(children)
    return [element]


def sanitize_svg(text: str) -> str:
    """An SVG document reduced to an allowlist of drawing elements and attributes: no script,
    no foreignObject, no link (`<a>` is unwrapped), no href/URL/target, no event handler, no style,
    no reference to anything outside the drawing. Raises FormatError for text that is not SVG."""
    try:  # defusedxml: no entity expansion, no external references
        root = defused_fromstring(text, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except DefusedXmlException:
        raise FormatError("an SVG with entity declarations or external references is refused") from None
    except ET.ParseError as e:
        raise FormatError(f"not an SVG document: {e}") from None
    if _local(root.tag) != "svg":
        raise FormatError(f"not an SVG document: the root element is <{_local(root.tag)}>")
    return ET.tostring(_clean(root)[0], encoding="unicode")
