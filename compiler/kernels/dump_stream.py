"""Triton's per-pass MLIR dumps (`MLIR_ENABLE_DUMP=1`) written through Triton's own buffered
stream, into one file per lowering stage.

Without `MLIR_DUMP_PATH`, Triton prints the dumps to llvm::dbgs(), unbuffered stderr: one write(2)
per token, millions for a model's kernels and their autotune configs (measured: an Inductor job on
a virtual sm_90 spent 16.7 s of its 43 s of CPU time in the kernel, writing). With
`MLIR_DUMP_PATH`, Triton opens a raw_fd_ostream once per process (at its first dump) and buffers
it by the file's block size, and nothing lets Python flush it. So here:

- the stream's file descriptor is pointed (dup2) at the stage's own file when the stage starts;
- when the stage ends, a pass manager with dumps on runs over a module whose dump is longer than
  two buffers (`_pad`: three blocks of the dump directory's file system): everything before it
  leaves the buffer, and what stays buffered is that dump's tail;
- the stage's file then holds the tail of the previous flush's dump, the stage's dumps, and the
  head of this flush's dump; `_tidy` keeps the stage's dumps alone.

A Triton that prints elsewhere (no stream opens, or some of its dumps bypass it) is left to print
on stderr (`available` False).
The descriptor is found once per process and stays the same in processes forked from it
(compiler/kernels/parallel.py), each of which then points it at files of its own.
"""
from __future__ import annotations

import os

HEADER = "// -----//"  # every dump starts with it ("// -----// IR Dump Before ...")
MARK = "irscope.flush"  # the flush module's attribute
_FLUSH_LINE = f"module attributes {{{MARK} = \""

_state: dict = {}  # this process's stream: {"fd", "context", "module"}; {"fd": None} when none


def available(dump_dir: str) -> bool:
    """Open Triton's dump stream in this process (at `dump_dir`/stream.mlir, unless an earlier
    capture opened it) and say whether its dumps can be split by stage."""
    if "fd" not in _state and _pipeliner_prints_on_stderr():
        _state["fd"] = None
    if "fd" not in _state:
        path = os.path.join(dump_dir, "stream.mlir")
        os.environ["MLIR_DUMP_PATH"] = path
        try:
            _state["context"], _state["module"] = _flush_module(dump_dir)
            _flush()
            _state["fd"] = next((fd for fd in _fds() if _target(fd) == os.path.realpath(path)), None)
        except Exception:  # noqa: BLE001 - an old Triton without the bindings: stderr, as before
            _state["fd"] = None
        if _state["fd"] is None:
            os.environ.pop("MLIR_DUMP_PATH", None)
        else:
            _aside()
    return _state["fd"] is not None


def _pipeliner_prints_on_stderr() -> bool:
    """Triton 3.7 and older print the software pipeliner's own dumps ("SoftwarePipeliner internal
    IR Dump After: LowerLoops") to llvm::dbgs(), not to the stream: there the stages keep stderr,
    where every dump lands in the order printed."""
    import triton
    major, minor = (int(part) for part in triton.__version__.split(".")[:2])
    return (major, minor) < (3, 8)


def begin(path: str) -> None:
    """Send the stream's next bytes (after the previous flush's tail) to `path`."""
    _point(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))


def end(path: str) -> None:
    """Push the stage's dumps out of Triton's buffer into `path` and keep them alone there."""
    _flush()
    _aside()  # the flush's tail, and what the stream holds at exit, go nowhere
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if "\n" + _FLUSH_LINE not in text:  # the flush did not reach the file: a buffer bigger than
        _state["fd"] = None              # its dump; the next stages print on stderr again
        os.environ.pop("MLIR_DUMP_PATH", None)
    with open(path, "w", encoding="utf-8") as f:
        f.write(_tidy(text))


def _aside() -> None:
    _point(os.open(os.devnull, os.O_WRONLY))


def _point(fd: int) -> None:
    try:
        os.dup2(fd, _state["fd"])
    finally:
        os.close(fd)


def _tidy(text: str) -> str:
    start = text.find(HEADER)  # before it: the previous flush's tail (it has no header)
    if start < 0:
        return ""
    flush = text.find("\n" + _FLUSH_LINE, start)
    if flush >= 0:  # this flush's dump starts at the header line above its module
        text = text[:text.rfind(HEADER, start, flush + 1)]
    return text[start:]


def _flush_module(dump_dir: str) -> tuple:
    """The module whose dump pushes the stream's buffer out, and its context."""
    from triton._C.libtriton import ir
    context = ir.context()
    ir.load_dialects(context)
    source = os.path.join(dump_dir, "flush.mlir")
    with open(source, "w") as f:
        f.write(f'{_FLUSH_LINE}{"x" * _pad(dump_dir)}"}} {{\n}}\n')
    return context, ir.parse_mlir_module(source, context)


def _flush() -> None:
    from triton._C.libtriton import ir, passes
    pm = ir.pass_manager(_state["context"])
    pm.enable_debug()
    passes.common.add_canonicalizer(pm)
    pm.run(_state["module"], "irscope_flush")


def _pad(directory: str) -> int:
    """The flush attribute's length: three blocks of the file system the stream's file is on
    (raw_fd_ostream buffers one block, its st_blksize), at least 12 KiB."""
    try:
        block = os.stat(directory).st_blksize
    except OSError:
        block = 4096
    return 3 * max(block, 4096)


def _fds() -> list[int]:
    try:
        return sorted(int(name) for name in os.listdir("/proc/self/fd"))
    except OSError:
        return []


def _target(fd: int) -> str | None:
    try:
        return os.path.realpath(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None
