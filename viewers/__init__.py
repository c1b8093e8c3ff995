"""Artifact -> markup. One table maps a stage's format to the viewer that renders it.

Viewers are pure functions of (text, meta): they know nothing of jobs, stores or HTTP.
A format not in the table is shown as plain text.
"""
from __future__ import annotations

from typing import Any, Callable

from markupsafe import escape

from viewers import code, graph, memory, mesh, profile, timeline

Viewer = Callable[[str, dict[str, Any]], str]


def _code(lexer: str) -> Viewer:
    return lambda text, meta: code.render(text, lexer, meta.get("source_map"))


# format -> viewer. Code formats are pygments lexer names (or ours in viewers/lexers.py).
VIEWERS: dict[str, Viewer] = {
    "python": _code("python"),
    "cpp": _code("cpp"),
    "c": _code("c"),
    "mlir": _code("mlir"),
    "hlo": _code("hlo"),
    "llvm": _code("llvm"),
    "ptx": _code("ptx"),
    "asm": _code("gas"),
    "sass": _code("gas"),
    "amdgcn": _code("gas"),
    "diff": _code("diff"),
    "json": _code("json"),
    "text": _code("text"),
    "mesh": mesh.render,
    "memory": memory.render,
    "timeline": timeline.render,
    "dot": graph.render,
    "svg": graph.render_svg,
    "profile": profile.render,
}


def render(fmt: str, text: str, meta: dict[str, Any] | None = None) -> str:
    """Markup for one artifact. `meta` carries the stage's source_map and viewer options."""
    viewer = VIEWERS.get(fmt, VIEWERS["text"])
    try:
        return viewer(text, dict(meta or {}))
    except Exception as e:  # noqa: BLE001 - a stage is job-written: a malformed one is shown as text
        return (f'<p class="truncated">the {escape(fmt)} viewer could not read this artifact '
                f'({escape(type(e).__name__)}: {escape(str(e)[:200])}); showing its text</p>' + code.render(text, "text"))


def register(fmt: str, viewer: Viewer) -> None:
    """Add a viewer for a new format; a format is registered once."""
    if fmt in VIEWERS:
        raise ValueError(f"viewer for {fmt!r} already registered")
    VIEWERS[fmt] = viewer
