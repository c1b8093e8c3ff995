"""Graphs a pipeline made as DOT text, drawn in the worker: Graphviz lays them out (through the
`graphviz` package, which runs `dot`) and the drawing is stored as an `svg` stage, sanitized
(compiler/formats.py). The web process never runs Graphviz on a job's DOT.

A graph with more nodes than MAX_NODES, or one Graphviz cannot lay out within LAYOUT_TIMEOUT_S,
is stored as its DOT text (format `dot`) with a note that says why.
"""
from __future__ import annotations

import contextlib
import re
import signal
import threading
from typing import Any, Iterator

from compiler import formats
from compiler.model import Stage
from compiler.pipeline import Bundle

MAX_NODES = 1500
LAYOUT_TIMEOUT_S = 20

_NODE_RE = re.compile(r"^\s*\"?[\w.%-]+\"?\s*\[", re.M)


def node_count(dot: str) -> int:
    """Node statements (`name [attrs]`), edges excluded."""
    return sum(1 for line in _NODE_RE.findall(dot) if "->" not in line and "--" not in line)


def strip_external(dot: str) -> str:
    """The DOT without graph attributes that make a drawing fetch something: XLA's DOT imports a
    web font through `stylesheet=<...>` (an HTML-like value that spans lines)."""
    out, i = [], 0
    for m in re.finditer(r"stylesheet\s*=\s*<", dot):
        if m.start() < i:
            continue
        depth, j = 1, m.end()
        while j < len(dot) and depth:
            depth += {"<": 1, ">": -1}.get(dot[j], 0)
            j += 1
        out.append(dot[i:m.start()])
        i = j
        while i < len(dot) and dot[i] in " ;\n":
            i += 1
    out.append(dot[i:])
    return re.sub(r'stylesheet\s*=\s*"[^"]*"\s*;?', "", "".join(out))


class LayoutTimeout(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise LayoutTimeout after `seconds` (subprocess.run kills its child when interrupted so).
    Signals reach the main thread only; elsewhere the job's own wall-clock limit is the bound."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(_signum: int, _frame: Any) -> None:
        raise LayoutTimeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def draw(dot: str) -> tuple[str, str, str]:
    """(format, text, note): ("svg", the sanitized drawing, "") or ("dot", the DOT text, why not)."""
    nodes = node_count(dot)
    if nodes > MAX_NODES:
        return "dot", dot, f"The graph has {nodes} nodes, more than the {MAX_NODES} drawn: shown as DOT text."
    import graphviz
    try:
        with _time_limit(LAYOUT_TIMEOUT_S):
            svg = graphviz.pipe_string("dot", "svg", strip_external(dot), encoding="utf-8", quiet=True)
        return "svg", formats.sanitize_svg(svg), ""
    except LayoutTimeout:
        return "dot", dot, f"Graphviz took more than {LAYOUT_TIMEOUT_S} s to lay the graph out: shown as DOT text."
    except graphviz.ExecutableNotFound:
        return "dot", dot, "Graphviz (dot) is not installed on the worker: shown as DOT text."
    except (graphviz.CalledProcessError, formats.FormatError) as e:
        why = (getattr(e, "stderr", None) or str(e))
        why = why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why)
        return "dot", dot, "Graphviz could not draw it: " + why.strip()[:300]


def add_graph(bundle: Bundle, key: str, title: str, group: str, dot: str, meta: dict[str, Any] | None = None) -> Stage:
    """Draw `dot` and write it as stage `key`: an `svg` drawing, or the `dot` text with a note."""
    fmt, text, why = draw(dot)
    meta = dict(meta or {})
    meta["nodes"] = node_count(dot)
    if why:
        meta["note"] = (meta.get("note", "") + " " + why).strip()
    return bundle.add(key, title, group, fmt, text, meta=meta)
