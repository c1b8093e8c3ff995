"""Diffs for the pages (a stage against another, two jobs' stages, two sources), bounded: no request
thread ever runs difflib itself.

difflib's cost grows with the square of the lines that differ, so a diff is refused past
`max_diff_lines` lines or `max_diff_kb` KiB a side, with a sentence that says so and what to do.
One within the bounds is computed in a diff process (spawned, long-lived, reused), which is killed
when a diff takes longer than `diff_timeout_s`; at most `diff_processes` run at once. Its markup is
kept (a small LRU, keyed by what was diffed: stage texts never change once stored), so a page
viewed again or polled costs nothing.
"""
from __future__ import annotations

import multiprocessing
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from markupsafe import escape

from service.configure import WebSettings
from viewers import diff as diff_viewer

_CACHE_ENTRIES = 128
_CACHE_BYTES = 64 << 20


@dataclass(frozen=True)
class DiffLimits:
    max_lines: int
    max_bytes: int
    timeout_s: float
    processes: int


def _serve(conn: Any) -> None:
    """A diff process: for each (kind, before, after, before_name, after_name) it is sent, the
    diff's markup (kind "html") or its unified text (kind "text", for MCP clients)."""
    conn.send("ready")
    while True:
        try:
            kind, *job = conn.recv()
        except EOFError:
            return
        conn.send(diff_viewer.render(*job) if kind == "html" else diff_viewer.unified(*job))


class _DiffProcess:
    """One long-lived diff process (spawned: nothing of the web process's threads is inherited),
    killed when a diff outlasts the timeout and spawned again for the next."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child,), daemon=True, name="irscope-diff")
        self.process.start()
        child.close()
        if not self.conn.poll(120) or self.conn.recv() != "ready":  # its start is not the diff's time
            self.close()
            raise RuntimeError("the diff process did not start")

    def render(self, job: tuple, timeout_s: float) -> str | None:
        self.conn.send(job)
        if self.conn.poll(timeout_s):
            return self.conn.recv()
        return None

    def close(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()


class Diffs:
    """The web process's diffs (one per app)."""

    def __init__(self, limits: DiffLimits):
        self.limits = limits
        self._slots = threading.BoundedSemaphore(max(limits.processes, 1))
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple, str] = OrderedDict()
        self._cached_bytes = 0
        self._idle: list[_DiffProcess] = []  # started diff processes waiting for a diff

    def refusal(self, sides: list[tuple[str, int, int]]) -> str | None:
        """The markup refusing a diff of texts of these (name, lines, bytes), or None: asked
        before the texts are read from the store, so a refused diff costs no more than that."""
        sentence = self.refusal_sentence(sides)
        return _note(sentence) if sentence else None

    def refusal_sentence(self, sides: list[tuple[str, int, int]]) -> str | None:
        """`refusal`'s sentence, as plain text."""
        for name, lines, size in sides:
            if lines > self.limits.max_lines:
                return (f"these stages are too long to diff here: {name} has {lines:,} lines, the limit is "
                        f"{self.limits.max_lines:,} (setting max_diff_lines); download both (raw) and diff "
                        "them locally")
            if size > self.limits.max_bytes:
                return (f"these stages are too large to diff here: {name} has {size:,} bytes, the limit is "
                        f"{self.limits.max_bytes:,} (setting max_diff_kb); download both (raw) and diff them "
                        "locally")
        return None

    def render(self, key: tuple, before: str, after: str, before_name: str, after_name: str) -> str:
        """The diff's markup, or a sentence saying why it is not shown (too long, too slow, busy)."""
        done, refusal = self._diff("html", key, before, after, before_name, after_name)
        return done if done is not None else _note(refusal)

    def unified(self, key: tuple, before: str, after: str, before_name: str,
                after_name: str) -> tuple[str | None, str | None]:
        """The unified diff's text ("" when the texts are the same) and None, or None and the
        sentence saying why it was not computed: the same bounds, processes and cache as the pages'."""
        return self._diff("text", key, before, after, before_name, after_name)

    def _diff(self, kind: str, key: tuple, before: str, after: str, before_name: str,
              after_name: str) -> tuple[str | None, str | None]:
        key = (kind, *key)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key], None
        refusal = self._too_big(before, after, before_name, after_name)
        if refusal:
            return None, refusal
        if before == after:  # no difflib work at all
            return (diff_viewer.render(before, after, before_name, after_name) if kind == "html" else ""), None
        if not self._slots.acquire(timeout=2.0):
            return None, (f"the server is computing {self.limits.processes} other diffs; try again in a moment "
                          "(setting diff_processes)")
        try:
            markup = self._run((kind, before, after, before_name, after_name))
        finally:
            self._slots.release()
        if markup is None:
            return None, (f"this diff took longer than {self.limits.timeout_s:g} s to compute and was stopped "
                          f"(setting diff_timeout_s): the two texts differ too much to diff here; download both "
                          "(raw) and diff them locally")
        with self._lock:
            self._cache[key] = markup
            self._cached_bytes += len(markup)
            while self._cache and (len(self._cache) > _CACHE_ENTRIES or self._cached_bytes > _CACHE_BYTES):
                _, dropped = self._cache.popitem(last=False)
                self._cached_bytes -= len(dropped)
        return markup, None

    def _too_big(self, before: str, after: str, before_name: str, after_name: str) -> str | None:
        return self.refusal_sentence([(name, text.count("\n") + 1, len(text.encode("utf-8", "replace")))
                             for name, text in ((before_name, before), (after_name, after))])

    def _run(self, job: tuple) -> str | None:
        with self._lock:
            process = self._idle.pop() if self._idle else None
        if process is None:
            process = _DiffProcess()
        try:
            markup = process.render(job, self.limits.timeout_s)
        except (EOFError, OSError):
            markup = None
        if markup is None:
            process.close()  # still computing (or dead): its diff is abandoned with it
        else:
            with self._lock:
                self._idle.append(process)
        return markup

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for process in idle:
            process.close()


def from_settings(web: WebSettings) -> Diffs:
    """The diffs of a process, bounded by the settings (max_diff_lines, max_diff_kb, diff_timeout_s,
    diff_processes)."""
    return Diffs(DiffLimits(max_lines=web.diff_max_lines, max_bytes=web.diff_max_bytes, timeout_s=web.diff_timeout_s,
                            processes=web.diff_processes))


def _note(sentence: str) -> str:
    return f'<p class="truncated diff-refused">{escape(sentence)}</p>'
