"""Running the user's source inside the worker: as a real file (so tracebacks, linecache and
Dynamo's frame info point at the user's lines), with stdout captured under a cap, and every
failure turned into a UserError that names the user's line."""
from __future__ import annotations

import ast
import contextlib
import errno
import importlib.util
import io
import os
import re
import runpy
import sys
import tempfile
import traceback
from typing import Any, Callable, Iterator

from compiler import python_ast
from compiler.errors import ErrorKind, UserFacing
from compiler.model import JobError, JobSettings
from compiler.pipeline import JobContext, UserError


def write_user_file(source: str, name: str, workdir: str) -> str:
    """Write the pasted source to a real file in `workdir` and return its path."""
    path = os.path.join(workdir, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    return path


def write_checked_user_file(source: str, name: str, workdir: str) -> str:
    """`write_user_file`, then the source compiled: a syntax error is the user's, naming its line."""
    path = write_user_file(source, name, workdir)
    try:
        compile(source, path, "exec")
    except SyntaxError as e:
        raise UserError(ErrorKind.SyntaxError, f"line {e.lineno}: {e.msg}", e.lineno) from None
    return path


def program_output_meta(output: str, target: str, executed: bool) -> dict:
    """The meta of a kernel program's "Program output" stage: its target, whether it ran, and on a
    virtual target where the program printed a tensor, why that reads FakeTensor(...)."""
    meta: dict = {"target": target, "executed": executed}
    if not executed and "FakeTensor(" in output:
        meta["note"] = ("Nothing ran on the virtual GPU: its tensors are PyTorch's fake tensors (shape, dtype and "
                        "device, no values), so a printed tensor reads FakeTensor(...).")
    return meta


def compiled_nothing(what: str, output: str, target: str) -> str:
    """The message of a kernel program that ran to its end and compiled nothing: `what` (how its
    kernels compile), then, where it printed something, its last line. A published program often
    checks the GPU first, prints why, and skips its kernels where they cannot run: that check saw
    `target`."""
    last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "")
    if not last:
        return what
    if len(last) > 200:
        last = last[:200] + "…"
    # one line: the page shows a message's first line and folds the rest (templates/_job_error.html)
    return (f"{what}. The program ran to its end; the last line it printed: {last!r}. Where it checks the GPU "
            f"it runs on before it compiles, it saw {target}: a target its kernels need is chosen with the "
            f"target option.")


class CappedText(io.TextIOBase):
    """A text sink that keeps the first `limit` characters and counts the rest."""

    def __init__(self, limit: int):
        self.limit = limit
        self.parts: list[str] = []
        self.kept = 0
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        room = self.limit - self.kept
        if room > 0:
            self.parts.append(s[:room])
            self.kept += min(room, len(s))
        self.dropped += max(0, len(s) - max(room, 0))
        return len(s)

    def getvalue(self) -> str:
        text = "".join(self.parts)
        if self.dropped:
            text += f"\n[irscope: output cut at {self.limit} characters; {self.dropped} more were dropped]\n"
        return text


@contextlib.contextmanager
def captured_stdout(sink: CappedText) -> Iterator[CappedText]:
    """Send Python-level stdout to `sink` for the duration (the program's prints)."""
    old = sys.stdout
    sys.stdout = sink  # type: ignore[assignment]
    try:
        yield sink
    finally:
        sys.stdout = old


def line_on_stack(path: str) -> int | None:
    """The innermost line of `path` on the caller's stack (a call the user's code made into a
    library that irscope wraps)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == path:
            return frame.f_lineno
        frame = frame.f_back  # type: ignore[assignment]
    return None


def user_line(exc: BaseException, path: str) -> int | None:
    """The innermost line of `path` in the exception's traceback (or its SyntaxError line)."""
    if isinstance(exc, SyntaxError) and exc.filename == path:
        return exc.lineno
    line = None
    seen: set[int] = set()
    current: BaseException | None = exc
    # Walk the chain too: Dynamo re-raises user exceptions from inside its own frames.
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for frame in traceback.extract_tb(current.__traceback__):
            if frame.filename == path:
                line = frame.lineno
        if line is not None:
            return line
        current = current.__cause__ or current.__context__
    # Dynamo traces symbolically, so its errors carry the user's frames in the message instead:
    # 'from user code:\n   File "/tmp/work/model.py", line 4, in model'.
    if not path:
        return None
    mentioned = [int(m.group(1)) for m in re.finditer(r'File "' + re.escape(path) + r'", line (\d+)', str(exc))]
    return mentioned[-1] if mentioned else None


# How Python's own runners name their frames: runpy (a program run as __main__) and importlib
# (one run as a module: run_as_module).
RUNNER_FRAMES = ("<frozen runpy>", "<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")
# irscope's own code, as a traceback names it: the job process and the pipelines (compiler/), and
# the runners through which irscope runs the user's file.
_IRSCOPE_CODE = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep + "compiler" + os.sep,
                 *RUNNER_FRAMES)
_FRAME = re.compile(r'^(?P<indent>\s*)File "(?P<file>[^"]+)", line \d+, in ')


def cut_irscope_frames(text: str, own: tuple[str, ...] = _IRSCOPE_CODE) -> str:
    """`text` with the traceback frames of irscope's own code cut (each frame is its `File "..."`
    line and the more indented lines under it: the code, the carets), each run of them replaced
    by one line saying how many were cut; the user's frames and the compiler's are kept."""
    lines = text.split("\n")
    out: list[str] = []
    cut, indent, i = 0, "", 0
    while i < len(lines):
        frame = _FRAME.match(lines[i])
        if frame and frame.group("file").startswith(own):
            cut, indent = cut + 1, frame.group("indent")
            i += 1
            while i < len(lines) and lines[i].startswith(indent + " ") and not _FRAME.match(lines[i]):
                i += 1
            continue
        if cut:
            out.append(f"{indent}[irscope: {cut} frame{'s' if cut > 1 else ''} of irscope's own code cut]")
            cut = 0
        out.append(lines[i])
        i += 1
    if cut:
        out.append(f"{indent}[irscope: {cut} frame{'s' if cut > 1 else ''} of irscope's own code cut]")
    return "\n".join(out)


# A compiler that wraps the exception the user's op raised in its own developer text (Dynamo's
# "RuntimeError when making fake tensor call ... call_function <built-in function linear>(...):
# got RuntimeError('a and b must have same reduction dim, but got [4, 64] X [32, 10].')").
_WRAPPED = re.compile(r"\bgot (?P<type>[A-Za-z_][\w.]*(?:Error|Exception))\((?P<q>['\"])(?P<msg>.+?)(?P=q)\)", re.S)
_WRAPPED_OP = re.compile(r"call_(?:function|method|module) <?(?:built-in function |built-in method |function )?"
                         r"(?P<op>[A-Za-z_][\w.]*)")


def point(text: str) -> str | None:
    """The wrapped exception's own message, with the op that raised it, when `text` buries it in a
    compiler's developer text; None when `text` leads with its point already."""
    wrapped = _WRAPPED.search(text)
    if wrapped is None:
        return None
    op = _WRAPPED_OP.search(text[:wrapped.start()])
    where = f" in {op.group('op')}" if op else ""
    return f"{wrapped.group('type')}{where}: {wrapped.group('msg').strip()}"


def describe(exc: BaseException) -> str:
    """The exception as Python prints it, irscope's frames cut; led by its point (`point`) on a line
    of its own when a compiler's text buries it (the page shows the first line, folds the rest)."""
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    found = point(text)
    if found:
        text = f"{found}\n\n{text}"
    return cut_irscope_frames(text)[:4000]


# What running out of memory looks like, wherever it happens: Python's MemoryError, PyTorch's CPU
# allocator ("[enforce fail at alloc_cpu.cpp:...] ... DefaultCPUAllocator: not enough memory"), a
# C++ std::bad_alloc, a CUDA OutOfMemoryError, g++ building a kernel ("virtual memory exhausted",
# "cc1plus: out of memory"), a fork or mmap refused with ENOMEM.
_OUT_OF_MEMORY = re.compile(r"not enough memory|can't allocate memory|cannot allocate memory|out of memory|"
                            r"std::bad_alloc|virtual memory exhausted", re.I)


def _raised_from(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then each exception it was raised from (its cause, else its context), once each."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def is_out_of_memory(exc: BaseException) -> bool:
    """True when `exc`, or an exception it was raised from, is a failure to get memory."""
    return any(isinstance(e, MemoryError) or (isinstance(e, OSError) and e.errno == errno.ENOMEM)
               or type(e).__name__ == "OutOfMemoryError" or _OUT_OF_MEMORY.search(str(e))
               for e in _raised_from(exc))


def out_of_disk(exc: BaseException) -> OSError | None:
    """The "no space left" (or disk quota) error `exc` is, or was raised from; None if none."""
    return next((e for e in _raised_from(exc) if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)),
                None)


def disk_limit_error(exc: OSError, limits: JobSettings, during: str) -> JobError:
    """A job's files filled its disk while irscope or a compiler wrote them (not the user's own
    write, which is their line's error): the limit it met, by where the write went."""
    where = str(exc.filename or "")
    if where.startswith(tempfile.gettempdir() + os.sep):
        room = f"its /tmp holds {limits.tmp_size_mb} MiB (setting tmp_size_mb)"
    else:
        room = f"its job directory holds {limits.job_disk_mb} MiB (setting job_disk_mb)"
    return JobError(ErrorKind.DiskLimit, f"the job ran out of disk {during}: {room}, and the files written there "
                                         f"filled it ({exc.strerror or exc}{': ' + where if where else ''}). "
                                         "Compile fewer kernels or autotune configs at once, or ask for more room.")


def user_error(exc: BaseException, path: str, limits: JobSettings, kind: ErrorKind = ErrorKind.UserCodeError,
               during: str = "") -> UserError:
    """A UserError for an exception raised by (or while compiling, or timing) the user's code;
    `limits` (the job's settings) name the sandbox limit an out-of-memory or an oversized file ran
    into; `during` says
    what irscope was doing, for failures outside the user's lines."""
    if isinstance(exc, UserError):
        return exc
    line = user_line(exc, path)
    where = f"line {line}: " if line else ""
    while_doing = f" while {during}" if during else ""
    if is_out_of_memory(exc):
        return UserError(ErrorKind.MemoryLimit, f"{where}ran out of memory{while_doing}: the sandbox's address-space "
                         f"limit is {limits.memory_limit_mb} MiB (setting memory_limit_mb); {describe(exc)}", line)
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return UserError(ErrorKind.FileSizeLimit, f"{where}a file grew past the {limits.file_size_limit_mb} MiB "
                         "file-size limit (setting file_size_limit_mb)", line)
    if isinstance(exc, SyntaxError) and exc.filename == path:
        return UserError(ErrorKind.SyntaxError, f"line {exc.lineno}: {exc.msg}", exc.lineno)
    raised_by = raised_in_irscope(exc)
    if raised_by is not None:
        # irscope's own code raised it (a hook, a recorder, a shim): irscope's fault, whichever
        # line of the user's was running; the user's line is said, not blamed. The traceback goes
        # to the worker log.
        traceback.print_exception(exc, file=sys.stderr)
        return UserError(ErrorKind.InternalError, f"irscope's own code failed in {raised_by}: {describe(exc)}"
                         + (f", while running your line {line}" if line else while_doing)
                         + ". This is irscope's bug, not your program's: please report this job (its worker log "
                           "has the traceback)", None)
    return UserError(kind, where + (f"{during}: " if during and not line else "") + describe(exc)
                     + _no_network(exc), line)


def _no_network(exc: BaseException) -> str:
    """A sentence for a failure to reach the network (a download from a hub, an address looked
    up): jobs have none, and what to do instead; "" for any other failure."""
    import socket
    chain, current = [], exc
    while current is not None and len(chain) < 20:
        chain.append(current)
        current = current.__cause__ or current.__context__
    text = " ".join(str(e) for e in chain)
    network = any(isinstance(e, (socket.gaierror, ConnectionError)) or "ConnectionError" in type(e).__name__
                  for e in chain) or re.search(r"couldn't connect to|Name or service not known|Network is unreachable"
                                               r"|Temporary failure in name resolution", text)
    if not network:
        return ""
    sentence = "\n(irscope: a job has no network, so nothing can be downloaded."
    if "huggingface" in text.lower():
        sentence += (" Build the model from its config instead, with random weights: the compiled code is the same "
                     "(`AutoModelForCausalLM.from_config(AutoConfig.for_model('llama', ...))`, or "
                     "`LlamaForCausalLM(LlamaConfig(...))`)")
    return sentence + ")"


def raised_in_irscope(exc: BaseException) -> str | None:
    """Where in irscope's own code (`function (compiler/<file>.py, line N)`) the exception was raised, when
    the frame that raised it is irscope's (not the user's, not a compiler's or the library's
    that irscope called); None otherwise."""
    frames = traceback.extract_tb(exc.__traceback__)
    if isinstance(exc, UserFacing) or not frames or not frames[-1].filename.startswith(_IRSCOPE_CODE[0]):
        return None
    relative = frames[-1].filename[len(os.path.dirname(_IRSCOPE_CODE[0].rstrip(os.sep))) + 1:]
    return f"{frames[-1].name} ({relative}, line {frames[-1].lineno})"


# The module a program that follows a language's convention (`model`, `fn`) runs as: not as
# __main__ (its main() guard is not taken), kept in sys.modules (run_as_module).
USER_MODULE = "__irscope_user__"


def run_as_module(path: str, name: str = USER_MODULE) -> dict[str, Any]:
    """Run the file as the module `name`, which stays in sys.modules after it ran (Python's recipe for
    importing a source file directly); its globals. Dynamo reads the globals of a function it
    inlines from a frame of another module by importing that function's module by name (the
    forward of the user's module inside an nn.Sequential): runpy.run_path takes its module out of
    sys.modules when the file has run, and that import failed ("No module named
    '__irscope_user__'")."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return vars(module)


def run_user_file(path: str, limits: JobSettings) -> tuple[dict[str, Any], str]:
    """Execute the file as `__main__`-less module code (run_as_module); return its namespace and
    what it printed (up to `limits.output_bytes` characters)."""
    sink = CappedText(limits.output_bytes)
    try:
        with captured_stdout(sink):
            namespace = run_as_module(path)
    except SystemExit as e:
        raise UserError(ErrorKind.UserCodeError, f"the program called exit({e.code}) before defining its model",
                        None) from None
    except BaseException as e:  # noqa: BLE001 - every failure of user code becomes a job error
        if isinstance(e, KeyboardInterrupt):
            raise
        error = user_error(e, path, limits)
        error.output = sink.getvalue()
        raise error from e
    return namespace, sink.getvalue()


def top_level_names(source: str) -> set[str] | None:
    """The names the source binds at its top level (in any branch of an `if`, `try`, `with` or
    loop there: assignments, functions, classes, imports, loop and `with` targets); None when it
    does not parse, or when a `from m import *` may bind any name. How a language tells a program
    that follows its convention (`model`, `fn`) from one that runs as written."""
    try:
        tree = python_ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    names: set[str] = set()
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                names.add((alias.asname or alias.name).split(".")[0])
            continue
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                todo.append(child)
            elif isinstance(child, ast.excepthandler):
                todo.extend(child.body)
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)) else \
            [item.optional_vars for item in node.items if item.optional_vars is not None] \
            if isinstance(node, (ast.With, ast.AsyncWith)) else []
        for target in targets:
            names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def runs_as_written(source: str, convention: set[str] | frozenset[str]) -> bool:
    """True when the source binds none of a language's `convention` names at its top level: a
    program that calls the compiler itself and runs as written. A source that does not parse, or
    that star-imports (it may bind them), is read as the convention's: its run says what is wrong."""
    names = top_level_names(source)
    return names is not None and not names & convention


def run_as_main(path: str, sink: CappedText, explain: Callable[[BaseException], UserError | None],
                then: Callable[[], None] = lambda: None) -> tuple[dict[str, Any], UserError | None]:
    """Run the user's program as `python file.py` runs it (`__main__`: its main() guard taken), its
    output into `sink`, then `then()` (still the program's run): its namespace, and its error or
    None. exit(0) ends it like its last line; a non-zero exit, and whatever it raises (`explain`
    says what), is a UserError returned, never an escape; `explain` answering None ends the program
    there as exit(0) would (a virtual GPU's program reading a value it cannot have). The run every
    program language shares (Triton, Gluon and Helion's, CuTe's)."""
    namespace: dict[str, Any] = {}
    sys.argv = [path]  # as `python file.py` gives it: no argument of irscope's own (runpy sets [0] again)
    try:
        with captured_stdout(sink):
            namespace = runpy.run_path(path, run_name="__main__")
        then()
    except SystemExit as e:
        if e.code not in (None, 0):
            return namespace, UserError(ErrorKind.UserCodeError, f"the program called exit({e.code})", None)
    except BaseException as e:  # noqa: BLE001 - every failure of user code becomes a job error
        if isinstance(e, KeyboardInterrupt):
            raise
        return namespace, explain(e)
    return namespace, None


def run_source(ctx: JobContext, path: str) -> tuple[dict[str, Any], str]:
    """run_user_file, keeping what the program printed as `run.stdout` when it fails."""
    try:
        return run_user_file(path, ctx.settings)
    except UserError as e:
        if e.output:
            ctx.bundle.add("run.stdout", "Program output", "Run", "text", e.output)
        raise
