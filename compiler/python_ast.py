"""Python's own parser, one caller at a time in a process. CPython 3.11's `ast.parse` keeps the
depth of the AST objects it is building in per-interpreter state: two threads parsing at once (a
garbage collection running a finalizer lets the other thread in) fail with `SystemError: AST
constructor recursion depth mismatch`. The web process parses on its request threads (is a source
a program, a reproducer's literal, an option's value), so every parse there goes through here.
A process where code irscope does not own parses beside irscope's threads (the test process:
pytest's assertion rewriter, the tests' own source checks) calls `guard_every_parse` once.
"""
from __future__ import annotations

import ast
import threading
from typing import Any

# Re-entrant: a guarded ast.parse may run inside a caller that already holds it.
LOCK = threading.RLock()
_UNGUARDED_PARSE = ast.parse


def parse(source: str, mode: str = "exec") -> ast.AST:
    """ast.parse(source, mode=mode), holding LOCK."""
    with LOCK:
        return _UNGUARDED_PARSE(source, mode=mode)


def literal_eval(text: str) -> Any:
    """ast.literal_eval(text), its parse holding LOCK."""
    return ast.literal_eval(parse(text.lstrip(" \t"), "eval"))


def _guarded_parse(*args: Any, **kwargs: Any) -> ast.AST:
    with LOCK:
        return _UNGUARDED_PARSE(*args, **kwargs)


def guard_every_parse() -> None:
    """Make every `ast.parse` in this process, whoever calls it, hold LOCK."""
    ast.parse = _guarded_parse
