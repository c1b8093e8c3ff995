"""Adapter: where a `@triton.jit` (or `@gluon.jit`) function is defined, its file and the line of
its `def`. Triton 3.8 added `JITFunction.file_name` and `JITFunction.def_file_line_number`; Triton
3.7 (toolchain triton-3.7.0) has neither, only the wrapped function's code object and
`starting_line_number` (the first decorator's line), from which the `def` line is found the way
Triton 3.8 finds it (`triton.runtime.jit.get_def_line_number`)."""
from __future__ import annotations

from typing import Any


def jit_file(fn: Any) -> str:
    """The file a JITFunction was defined in ("" when it says nothing)."""
    name = getattr(fn, "file_name", None)
    if name is None:  # Triton 3.7
        code = getattr(getattr(fn, "fn", None), "__code__", None)
        name = getattr(code, "co_filename", "")
    return str(name or "")


def jit_def_line(fn: Any) -> int:
    """The line of the JITFunction's `def` in its file (0 when it says nothing)."""
    line = getattr(fn, "def_file_line_number", None)
    if line is not None:
        return int(line or 0)
    start = getattr(fn, "starting_line_number", None)  # Triton 3.7
    if start is None:
        return 0
    for index, text in enumerate(getattr(fn, "raw_src", None) or []):
        if text.strip().startswith("def "):
            return int(start) + index
    return int(start)
