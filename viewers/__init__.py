"""Artifact -> markup. Each stage format (compiler/formats/) has one viewer here.

Viewers are pure functions of (text, meta): they know nothing of jobs, stores or HTTP. A format
not in the table (a stage stored before the format existed) is shown as plain text.
"""
from __future__ import annotations

from typing import Any, Callable

from markupsafe import escape

from compiler import formats
from viewers import code, collectives, graph, guards, memory, mesh, profile, resources, timeline

Viewer = Callable[[str, dict[str, Any]], str]


# The code formats whose lines are machine instructions, each opcode with its help (viewers/isa.py).
_INSTRUCTIONS = {"ptx": "ptx", "sass": "sass"}


def _code(lexer: str, fmt: str) -> Viewer:
    return lambda text, meta: code.render(text, lexer, meta.get("source_map"), ir_locations=meta.get("ir_locations"),
                                          ir_links=meta.get("ir_links"), first_line=int(meta.get("first_line", 1)),
                                          instructions=_INSTRUCTIONS.get(fmt))


# The formats that are not code, by name; every code format is drawn by its lexer.
_DRAWN: dict[str, Viewer] = {
    "svg": graph.render,
    "mesh": mesh.render,
    "collectives": collectives.render,
    "memory": memory.render,
    "timeline": timeline.render,
    "profile": profile.render,
    "guards": guards.render,
    "resources": resources.render,
}

VIEWERS: dict[str, Viewer] = {
    name: _DRAWN[name] if name in _DRAWN else _code(fmt.lexer or "text", name) for name, fmt in formats.FORMATS.items()
}


def render(fmt: str, text: str, meta: dict[str, Any] | None = None) -> str:
    """Markup for one artifact. `meta` carries the stage's source_map and viewer options."""
    viewer = VIEWERS.get(fmt, VIEWERS["text"])
    try:
        return viewer(text, dict(meta or {}))
    except Exception as e:  # noqa: BLE001 - a stage is job-written: a malformed one is shown as text
        return (f'<p class="truncated">the {escape(fmt)} viewer could not read this artifact '
                f'({escape(type(e).__name__)}: {escape(str(e)[:200])}); showing its text</p>'
                + code.render(text, "text"))


def register(fmt: str, viewer: Viewer) -> None:
    """Add a viewer for a new format; a format is registered once."""
    if fmt in VIEWERS:
        raise ValueError(f"viewer for {fmt!r} already registered")
    VIEWERS[fmt] = viewer
