"""The peak memory a compile-and-run job would hold, estimated on fake tensors before anything is
allocated, and the peak it did hold, measured afterwards.

The estimate replays what a compile-and-run job keeps alive, on the fake model and inputs, under
PyTorch's own `torch.distributed._tools.mem_tracker.MemTracker` (it follows every storage the ops
create and free, parameters, gradients and activations alike): the compiling first call and the
calls of both timed sides, each one's outputs kept as the measurement keeps them (with `training`,
each call's backward too), then the float64 eager reference the accuracy check runs (parameters
and inputs in float64, no grad). The compiled side is replayed by the eager model: Inductor's
graph holds the same inputs, outputs and saved tensors, and frees its intermediates as it goes
(fusion keeps fewer of them alive than eager does), so this is an estimate, labelled as one. It runs
in a forked child of the job process (`in_child`), bounded in time, so that running the model's
forward for it changes nothing of what the job then compiles.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

# What the estimate replays, in order (each a call of the model; its outputs are kept).
CALLS = ("the compiling first call", "the eager side's timed calls", "the compiled side's timed calls")
MODEL = ("MemTracker (torch.distributed._tools.mem_tracker) over the calls a compile-and-run job makes, replayed "
         "on fake tensors by the eager model: the compiling first call and both timed sides, each one's outputs "
         "kept (and its backward, with training), then the float64 eager reference of the accuracy check; the "
         "compiled graph stands in as the eager one")


@dataclass(frozen=True)
class PeakEstimate:
    """The most bytes live at once in the replay (None when it could not run, with the reason),
    and the peak of each part of it."""

    peak_bytes: int | None
    without_reference_bytes: int | None  # the peak if the float64 reference is left out
    seconds: float
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"estimated_peak_bytes": self.peak_bytes, "model": MODEL,
                               "estimate_s": round(self.seconds, 3)}
        if self.without_reference_bytes is not None:
            out["estimated_peak_without_float64_reference_bytes"] = self.without_reference_bytes
        if self.error:
            out["estimate_error"] = self.error
        return out


def estimate(model: Any, inputs: tuple, training: bool, mode: Any, torch: Any,
             loss_of: Any) -> PeakEstimate:
    """Replay a compile-and-run job's calls on the fake `model` and `inputs` (made under `mode`)
    and return the peak MemTracker saw. Nothing real is allocated; a model the fake tensors cannot
    run (it reads a tensor's values) gives no estimate and says why."""
    import torch.utils._pytree as pytree
    from torch.distributed._tools.mem_tracker import MemTracker

    started = time.perf_counter()
    tracker = MemTracker()
    tensors = [t for t in pytree.tree_leaves(inputs) if isinstance(t, torch.Tensor)]
    tracker.track_external(*([model] if isinstance(model, torch.nn.Module) else []), *tensors)

    def peak() -> int:
        return max((snapshot.get("Total", 0) for snapshot in tracker.get_tracker_snapshot("peak").values()),
                   default=0)

    kept: list[Any] = []
    try:
        with mode, tracker:
            for _ in CALLS:
                outputs = model(*inputs)
                if training:
                    loss_of(outputs, torch).backward()
                kept.append(outputs)
                tracker.reset_mod_stats()  # the module stats are per call; the peak is kept
            without_reference = peak()
            _float64_call(model, inputs, torch)
            total = peak()
    except Exception as e:  # noqa: BLE001 - a model fake tensors cannot run gets no estimate, and says why
        return PeakEstimate(None, None, time.perf_counter() - started, f"{type(e).__name__}: {e}"[:300])
    finally:
        del kept
    return PeakEstimate(total, without_reference, time.perf_counter() - started)


def in_child(estimate_fn: Any, timeout_s: float) -> PeakEstimate:
    """`estimate_fn()` run in a forked child of the job process, its PeakEstimate sent back through
    a pipe: whatever the model's forward does while it is replayed (counters, files, the random
    number generators, a wait on something that never comes) stays in the child, so the model the
    job then compiles is exactly as the source left it; past `timeout_s` the child is killed and
    there is no estimate. The child runs fake tensors only (no kernel, so no thread pool of the
    parent's is needed), and ends with os._exit (nothing of the parent's is flushed twice)."""
    import json
    import select
    import signal

    started = time.perf_counter()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_fd)
        try:
            result = estimate_fn()
            payload = json.dumps([result.peak_bytes, result.without_reference_bytes, result.seconds, result.error])
        except BaseException as e:  # noqa: BLE001 - whatever happens, the parent gets a sentence
            payload = json.dumps([None, None, 0.0, f"{type(e).__name__}: {e}"[:300]])
        os.write(write_fd, payload.encode())
        os._exit(0)
    os.close(write_fd)
    chunks: list[bytes] = []
    deadline = started + timeout_s
    try:
        while True:
            left = deadline - time.perf_counter()
            if left <= 0 or not select.select([read_fd], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                return PeakEstimate(None, None, time.perf_counter() - started,
                                    f"the estimate did not finish within {timeout_s:.0f} s")
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_fd)
        os.waitpid(pid, 0)
    try:
        peak, without, seconds, error = json.loads(b"".join(chunks).decode())
    except ValueError:
        return PeakEstimate(None, None, time.perf_counter() - started, "the estimate's process ended without one")
    return PeakEstimate(peak, without, seconds, error)


def _float64_call(model: Any, inputs: tuple, torch: Any) -> None:
    """What the accuracy check's float64 eager reference allocates: the parameters and buffers and
    the floating-point inputs in float64, and one no-grad call (torch.func.functional_call, so the
    fake module itself is not copied)."""
    import torch.func
    inputs64 = tuple(t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs)
    with torch.no_grad():
        if isinstance(model, torch.nn.Module):
            # float64 leaves that require grad where the parameters do (MemTracker hooks parameters)
            state = {name: (t.detach().double().requires_grad_(t.requires_grad) if t.is_floating_point() else t)
                     for name, t in [*model.named_parameters(), *model.named_buffers()]}
            torch.func.functional_call(model, state, inputs64)
        else:
            model(*inputs64)


def process_peak_bytes() -> int | None:
    """The resident memory high-water mark of this process so far (VmHWM), in bytes."""
    return _status_field("VmHWM")


def process_resident_bytes() -> int | None:
    """This process's resident memory now (VmRSS), in bytes."""
    return _status_field("VmRSS")


def _status_field(name: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
