"""Following the job's structured trace while the compile runs.

PyTorch writes each trace entry whole (metadata line and payload) and flushes it while holding
its trace handler's lock. A thread of the worker reads the file under that same lock every few
milliseconds, so it only ever sees whole entries, and hands each to `TraceStages`, which writes
the stages the entry completes: the page shows Dynamo's graph while AOTAutograd and Inductor are
still working. Each phase PyTorch starts (its `dynamo_timed` events, also trace entries) becomes
the job's progress text.

Reading the file (and not a logging handler of our own) keeps this working when the user's code
calls `torch._logging.set_logs`, which replaces the trace logger's handlers.
"""
from __future__ import annotations

import json
import os
import threading
from typing import Any, Callable

from compiler.pytorch import trace as torch_trace
from compiler.pytorch.trace_stages import TraceStages

POLL_S = 0.02

# PyTorch's dynamo_timed event names -> what the job's progress says while that phase runs.
PHASE_NAMES = {
    "entire_frame_compile": "Dynamo: compiling frame {cid}",
    "bytecode_tracing": "Dynamo: tracing the bytecode of frame {cid}",
    "build_guards": "Dynamo: building the guards of frame {cid}",
    "aot_collect_metadata": "AOTAutograd: collecting metadata [{cid}]",
    "create_aot_dispatcher_function": "AOTAutograd: tracing the joint graph [{cid}]",
    "aot_trace_joint_graph": "AOTAutograd: tracing the joint graph [{cid}]",
    "aot_trace_inference_graph": "AOTAutograd: tracing the inference graph [{cid}]",
    "min_cut_rematerialization_partition": "AOTAutograd: partitioning forward and backward [{cid}]",
    "_recursive_pre_grad_passes": "Inductor: pre-grad passes [{cid}]",
    "_recursive_joint_graph_passes": "Inductor: joint-graph passes [{cid}]",
    "_recursive_post_grad_passes": "Inductor: post-grad passes [{cid}]",
    "GraphLowering.run": "Inductor: lowering to Inductor IR [{cid}]",
    "Scheduler.__init__": "Inductor: scheduling and fusing [{cid}]",
    "GraphLowering.codegen": "Inductor: generating code [{cid}]",
    # loading the output code compiles its kernels: C++ (compile_file, below) or Triton's
    "PyCodeCache.load_by_key_path": "Inductor: loading the output code, compiling its kernels [{cid}]",
    "compile_file": "Inductor: compiling the kernels (C++ compiler) [{cid}]",
    "async_compile.wait": "Inductor: waiting for the kernel compiles [{cid}]",
}


def phase_of(entry: torch_trace.TraceEntry) -> str | None:
    """The progress text for a trace entry that starts a named phase, else None."""
    if entry.kind != "chromium_event":
        return None
    try:
        event = json.loads(entry.payload)
    except json.JSONDecodeError:
        return None
    text = PHASE_NAMES.get(event.get("name")) if event.get("ph") == "B" else None
    if text is None:
        return None
    return text.format(cid=entry.compile_id or (event.get("args") or {}).get("compile_id") or "?")


class TraceTail:
    """The complete entries of a TORCH_TRACE directory that have not been returned yet."""

    def __init__(self, directory: str, torch: Any):
        self.directory, self.torch = directory, torch
        self._offsets: dict[str, int] = {}

    def _handler(self) -> Any:
        return getattr(self.torch._logging._internal, "LOG_TRACE_HANDLER", None)

    def read(self, final: bool = False) -> list[torch_trace.TraceEntry]:
        """New entries. While the compile runs (`final` False) only the trace handler's own file
        is read, under its lock; at the end, every file of the directory (a child process's too)."""
        if final:
            names = sorted(os.listdir(self.directory)) if os.path.isdir(self.directory) else []
            return [e for name in names for e in self._read_file(os.path.join(self.directory, name))]
        handler = self._handler()
        path = getattr(handler, "_stream_path", None) if handler is not None else None
        if not path:
            return []
        with handler.lock:  # PyTorch writes and flushes each entry whole under this lock
            return self._read_file(path)

    def _read_file(self, path: str) -> list[torch_trace.TraceEntry]:
        offset = self._offsets.get(path, 0)
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read()
        except (FileNotFoundError, IsADirectoryError):
            return []
        if not data:
            return []
        self._offsets[path] = offset + len(data)
        return torch_trace.parse(data.decode("utf-8", errors="replace"))


class StageStream:
    """A thread that writes stages from the trace as PyTorch writes it (see the module doc)."""

    def __init__(self, stages: TraceStages, tail: TraceTail, progress: Callable[[str], None]):
        self.stages, self.tail, self.progress = stages, tail, progress
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._follow, name="irscope-trace-stream", daemon=True)

    def _feed(self, entries: list[torch_trace.TraceEntry]) -> None:
        phase = None
        for entry in entries:
            self.stages.add(entry)
            phase = phase_of(entry) or phase
        if phase:
            self.progress(phase)

    def _follow(self) -> None:
        try:
            while not self._stop.wait(POLL_S):
                self._feed(self.tail.read())
        except BaseException as e:  # noqa: BLE001 - raised again in the job's own thread by close()
            self._error = e

    def start(self) -> None:
        """Follow the trace from now on (from its first entry: what was written before is read
        first)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop following and read what is left. A failure of the thread is raised here, in the
        job's own thread. Then call `finish`."""
        self._stop.set()
        self._thread.join()
        if self._error is not None:
            raise self._error
        self._feed(self.tail.read(final=True))

    def finish(self, log_texts: dict[tuple[str, str], str]) -> list[torch_trace.TraceEntry]:
        """Write the stages that wait for the end; return every entry of the trace."""
        self.stages.finish(log_texts)
        return self.stages.entries
